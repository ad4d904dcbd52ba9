"""reference points: torch eager and torch.compile per problem and device fingerprint (issue 14)

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 14:15:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reference_points",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("problem_hash", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=400), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("verdict", sa.JSON(), nullable=False),
        sa.Column("measured_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("problem_hash", "fingerprint", "kind"),
    )


def downgrade() -> None:
    op.drop_table("reference_points")
