"""`kernel-agent report RUN -o report.html`: one self-contained HTML file about a run."""

from __future__ import annotations

from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import fail, stderr, stdout
from kernel_agent.cli.review_cmd import NO_OPEN, PORT, serve_page
from kernel_agent.cli.run_arg import RUN, resolve_run_or_fail


def report_command(
    run: str = RUN,
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="Where to write the HTML file."),
    serve: bool = typer.Option(
        False, "--serve", help="Serve the report and the review page on 127.0.0.1 until Ctrl-C (no file written)."
    ),
    port: int = PORT,
    no_open: bool = NO_OPEN,
    db: str = opt.DB,
) -> None:
    """Write the run's report: summary, kernels, charts, lineage, diffs, failures, provenance (opens offline)."""
    from kernel_agent.review.report import render_report

    database = opt.open_db(db)
    run_id = resolve_run_or_fail(database, run)
    if serve:
        serve_page(database, run_id, "report", port, not no_open)
        return
    if output.is_dir():
        fail(f"{output} is a directory; pass a file name with -o")
    if not output.resolve().parent.exists():
        fail(f"{output.resolve().parent} does not exist; create it or pass another -o")
    html = render_report(database, run_id)
    output.write_text(html, encoding="utf-8")
    stderr.print(f"report for run {run_id}: {len(html) // 1024} KiB", highlight=False)
    stdout.print(str(output), highlight=False)
