"""`kernel-agent export RUN [RUN...] --out DIR --name PKG [--format pip|hf-kernels]`: verified winners as a package."""

from __future__ import annotations

from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import fail, stderr, stdout, styled
from kernel_agent.cli.options import fields_of, from_config
from kernel_agent.cli.run_arg import resolve_run_or_fail
from kernel_agent.core.config import EvalConfig
from kernel_agent.export.formats import Format

EXPORT_TIMING_ROUNDS = 3  # re-verification is for correctness; its timing is reported, not required


@from_config
def export_command(
    runs: list[str] = typer.Argument(
        ...,
        metavar="RUN...",
        help="Run id(s), or `latest`; several runs merge (one winner per kernel and device).",
        show_default=False,
    ),
    out: Path = typer.Option(..., "--out", help="Folder to write the package into (new, empty, or a previous export)."),
    name: str = typer.Option(..., "--name", help="Python package name, e.g. my_kernels."),
    approved_only: bool = typer.Option(
        False, "--approved-only", help="Only candidates whose latest review is approve."
    ),
    kernel: list[str] = typer.Option(None, "--kernel", help="Only this kernel (repeatable)."),
    fmt: Format = typer.Option(
        Format.PIP, "--format", help="pip: an installable package; hf-kernels: a Hugging Face `kernels` project."
    ),
    evaluation: EvalConfig = fields_of(only=("sandbox_root", "threads", "timeout")),
    db: str = opt.DB,
) -> None:
    """Re-verify each kernel's best shippable candidate in the sandbox, then write the package, its
    tests and its benchmarks."""
    from kernel_agent.evaluate.pipeline import EvalOptions
    from kernel_agent.export.package import ExportError, export_run

    database = opt.open_db(db)
    run_ids = [resolve_run_or_fail(database, run) for run in runs]
    options = EvalOptions.from_config(evaluation, timing_rounds=EXPORT_TIMING_ROUNDS)
    try:
        result = export_run(
            database,
            run_ids,
            out,
            name,
            approved_only=approved_only,
            kernels=kernel or None,
            options=options,
            notify=lambda message: stderr.print(message, highlight=False, soft_wrap=True),
            fmt=fmt,
        )
    except ExportError as exc:
        fail(str(exc))
    for kernel_name, reason in result.skipped:
        stderr.print(styled("not exported:", "yellow", f" {kernel_name}: {reason}"), highlight=False, soft_wrap=True)
    for k in result.exported:
        speedup = k.pending or (f"{k.speedup:.2f}x" if k.speedup else "-")  # the number of record
        stdout.print(
            f"exported {k.name}: candidate {k.candidate_id}, {speedup} "
            f"on {k.device} ({k.device_name}); re-verified: {k.reverified}",
            highlight=False,
        )
    if fmt is Format.HF_KERNELS:
        load = f'from kernels import get_local_kernel; get_local_kernel(Path("{result.out.resolve()}") / "build")'
        stdout.print(f"{len(result.exported)} winner(s) in {result.out}; load with: {load}", highlight=False)
        return
    stdout.print(
        f"{len(result.exported)} kernel(s) in {result.out} "
        f"(package {result.package}); install with: pip install {result.out}",
        highlight=False,
    )
