"""reference point kinds name a compile mode: `compile:max-autotune-no-cudagraphs` (issue 14, --compile-mode)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 21:45:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reference_points") as batch:  # SQLite rebuilds the table; PostgreSQL alters the column
        batch.alter_column("kind", existing_type=sa.String(length=20), type_=sa.String(length=60))


def downgrade() -> None:
    with op.batch_alter_table("reference_points") as batch:
        batch.alter_column("kind", existing_type=sa.String(length=60), type_=sa.String(length=20))
