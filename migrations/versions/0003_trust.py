"""consent, party policies, certificates and per-task credentials

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# jobs that existed before consent did were run without it: record them as approved
BACKFILL = """
INSERT INTO approvals (job_id, party_id, decision, reason, decided_by, decided_at)
SELECT DISTINCT r.job_id, r.party_id, 'approved', 'created before approvals existed',
       'migration', CURRENT_TIMESTAMP
FROM role_assignments r
"""


def upgrade() -> None:
    with op.batch_alter_table("parties", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("auto_approve_from", sa.JSON(), nullable=False, server_default="[]")
        )
        batch_op.add_column(sa.Column("allowed_algorithms", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("custom_code", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("parties", schema=None) as batch_op:
        batch_op.alter_column("auto_approve_from", server_default=None)
        batch_op.alter_column("custom_code", server_default=None)

    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("certificate", sa.Text(), nullable=True))
        batch_op.add_column(
            sa.Column("certificate_expires_at", sa.DateTime(timezone=True), nullable=True)
        )

    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("rendezvous_secret", sa.String(length=64), nullable=True))

    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.add_column(sa.Column("credential_hash", sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint(
            batch_op.f("uq_tasks_credential_hash"), ["credential_hash"]
        )

    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("party_id", sa.String(length=32), nullable=False),
        sa.Column("decision", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("decided_by", sa.String(length=80), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_approvals_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["party_id"], ["parties.id"], name=op.f("fk_approvals_party_id_parties")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
        sa.UniqueConstraint("job_id", "party_id", name=op.f("uq_approvals_job_id_party_id")),
    )
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_approvals_party_id"), ["party_id"], unique=False)
    op.execute(BACKFILL)


def downgrade() -> None:
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approvals_party_id"))
    op.drop_table("approvals")
    with op.batch_alter_table("tasks", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_tasks_credential_hash"), type_="unique")
        batch_op.drop_column("credential_hash")
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("rendezvous_secret")
    with op.batch_alter_table("workers", schema=None) as batch_op:
        batch_op.drop_column("certificate_expires_at")
        batch_op.drop_column("certificate")
    with op.batch_alter_table("parties", schema=None) as batch_op:
        batch_op.drop_column("custom_code")
        batch_op.drop_column("allowed_algorithms")
        batch_op.drop_column("auto_approve_from")
