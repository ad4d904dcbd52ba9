"""LLM calls keep their reasoning apart (issue 33): llm_calls.reasoning (one thought per reply, capped),
llm_calls.reasoning_tokens, llm_calls.notes (a cut stream, a shrunk prompt, estimated usage), and
runs.endpoint_rules (what each endpoint of the run was learned to accept, so a resumed run starts from it).

Rows written before have no reasoning and no notes (NULL reads as an empty list) and 0 reasoning tokens.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 15:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("reasoning", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("reasoning_tokens", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("notes", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("endpoint_rules", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("endpoint_rules")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("notes")
        batch.drop_column("reasoning_tokens")
        batch.drop_column("reasoning")
