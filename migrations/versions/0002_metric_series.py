"""metric series summaries and a covering index

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


BACKFILL = """
INSERT INTO metric_series (attempt_id, name, rank, count, min_step, max_step, last_value, updated_at)
SELECT p.attempt_id, p.name, p.rank, count(*), min(p.step), max(p.step),
       (SELECT q.value FROM metric_points q
        WHERE q.attempt_id = p.attempt_id AND q.name = p.name AND q.rank = p.rank
        ORDER BY q.step DESC, q.id DESC LIMIT 1),
       CURRENT_TIMESTAMP
FROM metric_points p
GROUP BY p.attempt_id, p.name, p.rank
"""


def upgrade() -> None:
    op.create_table(
        "metric_series",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("attempt_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("min_step", sa.BigInteger(), nullable=False),
        sa.Column("max_step", sa.BigInteger(), nullable=False),
        sa.Column("last_value", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"],
            ["attempts.id"],
            name=op.f("fk_metric_series_attempt_id_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_metric_series")),
        sa.UniqueConstraint(
            "attempt_id", "name", "rank", name=op.f("uq_metric_series_attempt_id_name_rank")
        ),
    )
    with op.batch_alter_table("metric_points", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_metric_points_series"))
        batch_op.create_index(
            "ix_metric_points_series_steps",
            ["attempt_id", "name", "rank", "step", "value"],
            unique=False,
        )
    op.execute(BACKFILL)


def downgrade() -> None:
    with op.batch_alter_table("metric_points", schema=None) as batch_op:
        batch_op.drop_index("ix_metric_points_series_steps")
        batch_op.create_index(
            batch_op.f("ix_metric_points_series"), ["attempt_id", "name", "step"], unique=False
        )

    op.drop_table("metric_series")
