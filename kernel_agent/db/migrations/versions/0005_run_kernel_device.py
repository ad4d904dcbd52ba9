"""a run's kernel on each device it names: run_kernels.device, unique per (run, problem, device) (issue 16,
`optimize --device cpu,cuda`)

Rows written before hold the one device their run named (its stored plan's `evaluation.device`, or `device` in
a plan of format 1; auto when there is none), so a stopped run resumes into the same rows.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 10:00:00.000000
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# 0001 left the (run_id, problem_id) constraint unnamed: SQLite's batch mode names it by this convention when it
# reflects the table; PostgreSQL named it itself (run_kernels_run_id_problem_id_key), read back before the change.
NAMING = {"uq": "uq_%(table_name)s_%(column_0_name)s"}
NEW = "uq_run_kernels_run_problem_device"
DEVICES = ("auto", "cpu", "cuda")


def _unique_named(columns: list[str]) -> str:
    for constraint in sa.inspect(op.get_bind()).get_unique_constraints("run_kernels"):
        if constraint["column_names"] == columns and constraint.get("name"):
            return constraint["name"]
    return NAMING["uq"] % {"table_name": "run_kernels", "column_0_name": columns[0]}


def stored_device(options: object) -> str:
    """The device a run's stored plan named (auto when it names none, or none that is known)."""
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except ValueError:
            return "auto"
    if not isinstance(options, dict):
        return "auto"
    evaluation = options.get("evaluation")
    device = evaluation.get("device") if isinstance(evaluation, dict) else options.get("device")
    return device if device in DEVICES else "auto"


def upgrade() -> None:
    old = _unique_named(["run_id", "problem_id"])
    with op.batch_alter_table("run_kernels", naming_convention=NAMING) as batch:  # SQLite rebuilds the table
        batch.add_column(sa.Column("device", sa.String(length=10), nullable=False, server_default="auto"))
        batch.drop_constraint(old, type_="unique")
        batch.create_unique_constraint(NEW, ["run_id", "problem_id", "device"])
    bind = op.get_bind()
    for run_id, options in bind.execute(sa.text("SELECT id, options FROM runs")).all():
        device = stored_device(options)
        if device != "auto":
            bind.execute(sa.text("UPDATE run_kernels SET device = :d WHERE run_id = :r"), {"d": device, "r": run_id})


def downgrade() -> None:
    """Back to one row per (run, problem): refused while a run holds a problem on two devices."""
    bind = op.get_bind()
    twice = bind.execute(
        sa.text("SELECT run_id, problem_id FROM run_kernels GROUP BY run_id, problem_id HAVING COUNT(*) > 1")
    ).first()
    if twice is not None:
        raise RuntimeError(
            f"run {twice[0]} holds problem {twice[1]} on several devices; 0004 keeps one row per run and problem"
        )
    with op.batch_alter_table("run_kernels", naming_convention=NAMING) as batch:
        batch.drop_constraint(NEW, type_="unique")
        batch.create_unique_constraint("uq_run_kernels_run_id", ["run_id", "problem_id"])
        batch.drop_column("device")
