"""tuning times: every config of a variant per shape, the ground truth of selectors (issue 15)

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 17:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tuning_times",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("problem", sa.String(length=200), nullable=False),
        sa.Column("problem_hash", sa.String(length=64), nullable=False),
        sa.Column("variant_hash", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=400), nullable=False),
        sa.Column("dtype", sa.String(length=20), nullable=False),
        sa.Column("shape", sa.String(length=200), nullable=False),
        sa.Column("config", sa.String(length=400), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("time_ms", sa.Float(), nullable=True),
        sa.Column("ci_low_ms", sa.Float(), nullable=True),
        sa.Column("ci_high_ms", sa.Float(), nullable=True),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("baseline_ms", sa.Float(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("measured_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("problem_hash", "variant_hash", "fingerprint", "dtype", "shape", "config", "stage"),
    )
    op.create_index("ix_tuning_times_variant", "tuning_times", ["problem_hash", "variant_hash", "fingerprint"])


def downgrade() -> None:
    op.drop_index("ix_tuning_times_variant", table_name="tuning_times")
    op.drop_table("tuning_times")
