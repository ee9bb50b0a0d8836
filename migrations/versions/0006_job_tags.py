"""a job's tags, and each tag once more in job_tags to find jobs by it

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("tags", sa.JSON(), nullable=False, server_default=sa.text("'[]'"))
        )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.alter_column("tags", server_default=None)
    op.create_table(
        "job_tags",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("tag", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_tags_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "tag", name=op.f("pk_job_tags")),
    )
    with op.batch_alter_table("job_tags", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_tags_tag"), ["tag"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("job_tags", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_tags_tag"))
    op.drop_table("job_tags")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_column("tags")
