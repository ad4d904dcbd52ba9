"""Evidence where winners are used (issue 37): llm_calls.templates (sha256 of each prompt template a call
rendered, for the verdict certificate) and the e2e_runs table (a package's kernels swapped into a model: outputs
checked, the forward pass A/B-timed, micro and model speedups side by side).

Calls stored before have no template hashes (NULL: the certificate says they were not recorded).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05 10:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("templates", sa.JSON(), nullable=True))
    op.create_table(
        "e2e_runs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("package", sa.Text(), nullable=False),
        sa.Column("package_name", sa.String(200), nullable=False),
        sa.Column("format", sa.String(20), nullable=False),
        sa.Column("recipe", sa.Text(), nullable=False),
        sa.Column("device", sa.String(10), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False, server_default=""),
        sa.Column("speedup", sa.Float(), nullable=True),
        sa.Column("ci_low", sa.Float(), nullable=True),
        sa.Column("ci_high", sa.Float(), nullable=True),
        sa.Column("run_ids", sa.JSON(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("e2e_runs")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("templates")
