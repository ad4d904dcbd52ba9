"""`kernel-agent profile PROBLEM [--candidate FILE|ID]`: where a kernel stands against the machine's limits.

Ceilings (the ones stored for this device fingerprint, which `optimize` uses too), work
counts and roofline floors per benchmark shape, the baseline's (or a candidate's) verified
timing as a fraction of the floor, and a torch.profiler breakdown (the candidate's from
inside its sandbox).
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from kernel_agent.cli.ceilings import profile_ceilings
from kernel_agent.cli.common import EXIT_OK, EXIT_VERDICT, fail, read_candidate, stderr, stdout, styled, warn
from kernel_agent.cli.options import DB, fields_of, from_config, json_option, open_db
from kernel_agent.core.config import Device, EvalConfig, ProfileWhen


@from_config
def profile_command(
    problem: Path | None = typer.Argument(
        None,
        help="A problem folder (problem.py + kernel.py) or a KernelBench .py file; without one, only the ceilings.",
    ),
    candidate: str | None = typer.Option(
        None,
        "--candidate",
        help=(
            "Time this candidate (a file, or a candidate id in the database; "
            "verified in the sandbox) instead of the baseline against itself."
        ),
    ),
    evaluation: EvalConfig = fields_of(only=("device", "threads")),
    ceilings: bool = typer.Option(
        True,
        "--ceilings/--no-ceilings",
        help=(
            "Show the bandwidth and matmul rates stored for this device "
            "(measured and stored the first time; needed for floors)."
        ),
    ),
    remeasure: bool = typer.Option(
        False, "--remeasure", help="Measure the ceilings again now and replace the stored ones."
    ),
    db: str = DB,
    json_output: bool = json_option("exactly one JSON object"),
) -> None:
    """Show work counts, roofline floors and the fraction of the floor a kernel reaches."""
    import torch

    from kernel_agent.evaluate.pipeline import EvalOptions, run_device
    from kernel_agent.measure.error import ProfileError
    from kernel_agent.measure.profile import build_profile
    from kernel_agent.measure.roofline import shape_rows, without_candidate
    from kernel_agent.problem.load import ProblemError, load_problem

    device = evaluation.device
    if device == Device.CUDA and not torch.cuda.is_available():
        fail("--device cuda: no CUDA device is visible here; use --device cpu or auto")
    threads = EvalOptions.from_config(evaluation).threads
    if problem is None:
        if not ceilings or candidate is not None:
            fail("give a PROBLEM to profile (without one, profile shows the device's ceilings)")
        where = "cpu" if device == "cpu" or not torch.cuda.is_available() else "cuda"
        show_ceilings(where, *profile_ceilings(db, where, threads, remeasure), json_output)
        raise typer.Exit(EXIT_OK)
    try:
        loaded = load_problem(problem)
    except ProblemError as exc:
        fail(str(exc))
    source = None if candidate is None else candidate_source(candidate, loaded.name, db)
    where = run_device(loaded, device)
    measured, origin = profile_ceilings(db, where, threads, remeasure) if ceilings else (None, "")

    role = "candidate" if source is not None else "baseline"
    if source is None:
        # A/A: the baseline as its own candidate (KernelBench candidates must name ModelNew).
        source = loaded.baseline_as_candidate
    stderr.print(f"timing the {role} (verified, sandboxed) ...", highlight=False)
    verdict = timed(loaded, source, EvalOptions.from_config(evaluation, profile=ProfileWhen.ALWAYS))
    timing = verdict.timing if verdict is not None else None
    if verdict is not None and timing is None:
        warn(f"no timing: {verdict.status}: {verdict.reason}")

    try:
        rows = shape_rows(loaded, timing, measured)
    except ProfileError as exc:
        fail(str(exc))
    if role == "baseline":  # A/A: the "candidate" side is the baseline again; keep one set of numbers
        rows = without_candidate(rows)
    breakdown = operator_breakdown(loaded, verdict, role, where)
    profile = build_profile(
        loaded, timing, measured, rows=rows, role=role, breakdown=breakdown if "error" not in breakdown else None
    )

    report = ProfileReport(
        loaded.name, where, measured, origin, rows, profile, timing_summary(verdict, role), breakdown
    )
    if json_output:
        sys.stdout.write(json.dumps(report.to_json(), default=str) + "\n")
    else:
        render(report)
    failed = candidate is not None and (verdict is None or not verdict.passed)
    raise typer.Exit(EXIT_VERDICT if failed else EXIT_OK)


@dataclass
class ProfileReport:
    """What `profile` shows for one problem: `--json` prints `to_json()`, otherwise `render`."""

    problem: str
    device: str
    ceilings: Any  # measure.ceilings.Ceilings, or None
    ceilings_origin: str
    rows: list[Any]  # measure.roofline.RooflineRow, one per benchmark shape
    profile: dict[str, Any]
    timing: dict[str, Any] | None
    breakdown: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        from kernel_agent.measure.ceilings import ceilings_to_dict

        suspicious = [
            row for row in self.rows if any(side and side.faster_than_floor for side in (row.baseline, row.candidate))
        ]
        return {
            "problem": self.problem,
            "device": self.device,
            "ceilings": ceilings_to_dict(self.ceilings) if self.ceilings is not None else None,
            "ceilings_origin": self.ceilings_origin,
            "shapes": [row.detail() for row in self.rows],
            "profile": self.profile,
            "timing": self.timing,
            "breakdown": self.breakdown,
            "faster_than_floor": [list(row.shape) for row in suspicious],
        }


def timed(problem, source: str, options) -> Any:  # noqa: ANN001 - a Problem and EvalOptions, imported lazily
    """The verdict of `source` timed in a throwaway sandbox (None when no sandbox can start here)."""
    from dataclasses import replace

    from kernel_agent.evaluate.pipeline import evaluate

    with tempfile.TemporaryDirectory(prefix="kernel-agent-profile-") as sandbox:
        try:
            return evaluate(problem, source, replace(options, sandbox_root=Path(sandbox)))
        except RuntimeError as exc:  # e.g. no isolation available
            warn(f"no timing: {exc}")
            return None


def operator_breakdown(problem, verdict, role: str, where: str) -> dict[str, Any]:  # noqa: ANN001 - a Problem and a Verdict
    """The torch.profiler breakdown: the one the sandboxed process reported, else (for the baseline) one taken here."""
    from kernel_agent.measure.trusted_breakdown import profiler_breakdown

    if verdict is not None and verdict.profile:
        return {"role": role, **verdict.profile}  # profiled inside its sandbox after the timing
    if role != "baseline":
        return {"error": "the candidate was not timed, so it was not profiled"}
    try:  # trusted code only: the problem's own baseline, in this process
        return {
            "role": role,
            **profiler_breakdown(problem, problem.baseline_path, problem.shapes[0], problem.dtypes[0], where),
        }
    except Exception as exc:  # noqa: BLE001 - e.g. a Triton baseline on a machine without a GPU
        return {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}


def timing_summary(verdict, role: str) -> dict[str, Any] | None:  # noqa: ANN001 - a Verdict
    if verdict is None:
        return None
    summary = {
        "role": role,
        "status": verdict.status,
        "reason": verdict.reason,
        "speedup": verdict.speedup,
        "speedup_ci": verdict.speedup_ci,
    }
    if verdict.timing is not None:
        summary.update(baseline=verdict.timing.baseline.to_json(), candidate=verdict.timing.candidate.to_json())
    return summary


def candidate_source(candidate: str, kernel: str, db: str | None) -> str:
    """A candidate file's text, or a stored candidate's source (it must belong to this kernel)."""
    if Path(candidate).is_file() or not candidate.isdigit():
        return read_candidate(Path(candidate))
    from kernel_agent.db.reads import candidate_detail

    found = candidate_detail(open_db(db), int(candidate))
    if found is None or not found.get("source"):
        fail(f"candidate {candidate}: not in the database (kernel-agent candidates list shows the ids)")
    if found["kernel"] != kernel:
        fail(f"candidate {candidate} belongs to kernel {found['kernel']}, not {kernel}")
    return found["source"]


def _fmt(value: Any, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(value) >= factor and unit:
                return f"{value / factor:.3g} {prefix}{unit}"
        return f"{value:.4g}{(' ' + unit) if unit else ''}"
    return str(value)


def show_ceilings(device: str, ceilings, origin: str, json_output: bool) -> None:
    """`profile --ceilings` without a problem: the device's ceilings alone."""
    from kernel_agent.measure.ceilings import ceilings_to_dict

    if ceilings is None:
        fail(f"no ceilings for {device}")
    if json_output:
        sys.stdout.write(
            json.dumps({"device": device, "ceilings": ceilings_to_dict(ceilings), "ceilings_origin": origin}) + "\n"
        )
    else:
        stdout.print(ceilings_line(ceilings, origin), highlight=False)


def ceilings_line(ceilings, origin: str) -> str:
    if ceilings is None:
        return "ceilings: not measured (no floors)"
    rates = ", ".join(f"{dtype} {rate:.4g} GFLOP/s" for dtype, rate in ceilings.gflops.items()) or "no matmul rate"
    return (
        f"ceilings ({ceilings.device_name}, {ceilings.fingerprint.split(' | ')[-1]}, {origin}): "
        f"memory {ceilings.memory_gbps:.4g} GB/s; {rates}"
    )


def render(report: ProfileReport) -> None:
    from rich.table import Table
    from rich.text import Text

    name, device, ceilings, origin, rows = (
        report.problem,
        report.device,
        report.ceilings,
        report.ceilings_origin,
        [row.detail() for row in report.rows],
    )
    summary, breakdown = report.timing, report.breakdown
    stdout.print(styled(name, "bold", f" on {device}"), highlight=False)
    stdout.print(ceilings_line(ceilings, origin), highlight=False)
    if summary is not None:
        speed = f", speedup {summary['speedup']:.3f}x" if summary.get("speedup") is not None else ""
        stdout.print(f"timing: {summary['role']} verdict {summary['status']}{speed}", highlight=False)
    roles = [r for r in ("baseline", "candidate") if any(f"{r}_median_ms" in row for row in rows)]
    dtype = rows[0]["dtype"] if rows else ""
    table = Table(title=f"per benchmark shape ({dtype})")
    table.add_column("")
    for row in rows:
        table.add_column("x".join(str(d) for d in row["shape"]), justify="right")
    metrics: list[tuple[str, Any]] = [
        (
            "work",
            lambda row: (
                _fmt(row["flops"], "FLOP") + ("" if row["flops_source"] == "declared" else f" ({row['flops_source']})")
            ),
        ),
        ("min. traffic", lambda row: _fmt(row["bytes"], "B")),
        ("FLOP/byte", lambda row: _fmt(row["intensity"])),
        ("bound", lambda row: row.get("bound", "-")),
        ("floor ms", lambda row: _fmt(row.get("floor_ms"))),
    ]
    for role in roles:
        metrics += [
            (f"{role} ms (median)", lambda row, r=role: _fmt(row.get(f"{r}_median_ms"))),
            (f"{role} GB/s", lambda row, r=role: _fmt(row.get(f"{r}_gbps"))),
            (f"{role} GFLOP/s", lambda row, r=role: _fmt(row.get(f"{r}_gflops"))),
            (
                f"{role} fraction of floor",
                lambda row, r=role: Text.assemble(
                    _fmt(row.get(f"{r}_fraction_of_floor")),
                    (" faster than the floor!", "bold red") if row.get(f"{r}_faster_than_floor") else "",
                ),
            ),
        ]
    for label, cell in metrics:
        table.add_row(label, *(cell(row) for row in rows))
    stdout.print(table)
    if "error" in breakdown:
        stdout.print(f"profiler breakdown unavailable: {breakdown['error']}", highlight=False)
        return
    where = "trusted code in-process" if breakdown.get("trusted_only") else "reported by its sandboxed process"
    ops = Table(
        title=(
            f"{breakdown['role']} profile at {'x'.join(str(d) for d in breakdown['shape'])} "
            f"({breakdown['calls']} calls, {where})"
        )
    )
    cuda = breakdown["device"] == "cuda"
    for column in ("operator", "count", "self CPU ms") + (("self CUDA ms",) if cuda else ()):
        ops.add_column(column)
    for op in breakdown["top_ops"]:
        ops.add_row(
            op["name"], str(op["count"]), f"{op['self_cpu_ms']:.4g}", *((f"{op['self_cuda_ms']:.4g}",) if cuda else ())
        )
    stdout.print(ops)
    launches = "kernel launches" if cuda else "top-level torch ops"
    stdout.print(
        f"per call: {breakdown['wall_ms_per_call']:.4g} ms wall, {breakdown['outside_ops_ms_per_call']:.4g} "
        f"ms outside torch operators, {breakdown['launches_per_call']:.4g} {launches}",
        highlight=False,
    )
