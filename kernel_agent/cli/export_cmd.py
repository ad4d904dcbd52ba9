"""`kernel-agent export RUN --out DIR --name PKG`: the run's verified winners as an installable package."""

from __future__ import annotations

from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import fail, stderr, stdout, styled
from kernel_agent.cli.options import fields_of, from_config
from kernel_agent.cli.run_arg import RUN, resolve_run_or_fail
from kernel_agent.core.config import EvalConfig

EXPORT_TIMING_ROUNDS = 3  # re-verification is for correctness; its timing is reported, not required


@from_config
def export_command(
    run: str = RUN,
    out: Path = typer.Option(..., "--out", help="Folder to write the package into (new, empty, or a previous export)."),
    name: str = typer.Option(..., "--name", help="Python package name, e.g. my_kernels."),
    approved_only: bool = typer.Option(
        False, "--approved-only", help="Only candidates whose latest review is approve."
    ),
    kernel: list[str] = typer.Option(None, "--kernel", help="Only this kernel (repeatable)."),
    evaluation: EvalConfig = fields_of(only=("sandbox_root", "threads", "timeout")),
    db: str = opt.DB,
) -> None:
    """Re-verify each kernel's best shippable candidate in the sandbox, then write the package, its
    tests and its benchmarks."""
    from kernel_agent.evaluate.pipeline import EvalOptions
    from kernel_agent.export.package import ExportError, export_run

    database = opt.open_db(db)
    run_id = resolve_run_or_fail(database, run)
    options = EvalOptions.from_config(evaluation, timing_rounds=EXPORT_TIMING_ROUNDS)
    try:
        result = export_run(
            database,
            run_id,
            out,
            name,
            approved_only=approved_only,
            kernels=kernel or None,
            options=options,
            notify=lambda message: stderr.print(message, highlight=False),
        )
    except ExportError as exc:
        fail(str(exc))
    for kernel_name, reason in result.skipped:
        stderr.print(styled("not exported:", "yellow", f" {kernel_name}: {reason}"), highlight=False, soft_wrap=True)
    for k in result.exported:
        speedup = f"{k.speedup:.2f}x" if k.speedup else "-"
        stdout.print(
            f"exported {k.name}: candidate {k.candidate_id}, {speedup} "
            f"on {k.device} ({k.device_name}); re-verified: {k.reverified}",
            highlight=False,
        )
    stdout.print(
        f"{len(result.exported)} kernel(s) in {result.out} "
        f"(package {result.package}); install with: pip install {result.out}",
        highlight=False,
    )
