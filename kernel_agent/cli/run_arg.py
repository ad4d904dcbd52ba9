"""The RUN argument shared by runs show, review, report and export: an id or `latest`."""

from __future__ import annotations

import typer

RUN = typer.Argument(..., help="Run id, or `latest` for the newest run.", show_default=False)


def resolve_run_or_fail(db, run: str) -> int:  # noqa: ANN001 - a kernel_agent.db.session.Database
    """The run id for RUN, or exit 2 with one line."""
    from kernel_agent.cli.common import fail
    from kernel_agent.db.review_reads import resolve_run

    run_id = resolve_run(db, run)
    if run_id is None:
        if run.strip().lower() == "latest":
            fail("no runs in this database yet; `kernel-agent optimize KERNEL` makes one")
        fail(f"no run {run} in this database; `kernel-agent runs list` shows the runs")
    return run_id
