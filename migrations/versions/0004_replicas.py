"""failures by a lost peer, and the lease that makes one replica the scheduler

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("lost_peer", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.alter_column("lost_peer", server_default=None)

    op.create_table(
        "leases",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_leases")),
    )


def downgrade() -> None:
    op.drop_table("leases")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_column("lost_peer")
