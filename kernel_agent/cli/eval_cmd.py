"""`kernel-agent eval PROBLEM CANDIDATE`: one trusted verdict."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.ceilings import profile_ceilings
from kernel_agent.cli.common import EXIT_OK, EXIT_VERDICT, fail, read_candidate, stdout, styled, warn
from kernel_agent.cli.doctor_cmd import print_fallback
from kernel_agent.cli.options import fields_of, from_config
from kernel_agent.cli.references import check_compile_modes
from kernel_agent.cli.speedups import slower
from kernel_agent.core import json_out
from kernel_agent.core.config import Device, EvalConfig, ReferenceConfig
from kernel_agent.core.of_record import typical_ms
from kernel_agent.core.relative import over_baseline, speedup_vs_json
from kernel_agent.core.timing_result import TimingResult


@from_config
def eval_command(
    problem: Path = typer.Argument(..., help="A problem folder (problem.py + kernel.py) or a KernelBench .py file."),
    candidate: Path = typer.Argument(..., help="The candidate kernel source file."),
    json_output: bool = opt.json_option("exactly one JSON verdict"),
    evaluation: EvalConfig = fields_of(skip=("sanity_speedup", "timing_rounds")),
    references: ReferenceConfig = fields_of(),
    db: str = opt.DB,
) -> None:
    """Verify and time one candidate against a problem's baseline."""
    import torch

    from kernel_agent.evaluate.canaries import audit_problem
    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate, run_device
    from kernel_agent.problem.load import ProblemError, load_problem

    device = evaluation.device
    if device == Device.CUDA and not torch.cuda.is_available():
        fail("--device cuda: no CUDA device is visible here; use --device cpu or auto")
    check_compile_modes(references.compile_modes)
    source = read_candidate(candidate)
    try:
        loaded = load_problem(problem)
        for warning in audit_problem(loaded, run_device(loaded, device)):
            warn(warning)
    except ProblemError as exc:
        fail(str(exc))
    options = EvalOptions.from_config(evaluation)
    print_fallback(evaluation.isolation)
    options.ceilings, _ = profile_ceilings(db, run_device(loaded, device), options.threads, remeasure=False)
    try:
        verdict = evaluate(loaded, source, options)
    except RuntimeError as exc:  # e.g. the requested isolation level is unavailable
        fail(str(exc))
    points = {}
    if references.references and verdict.speedup is not None:  # nothing to compare without a speedup
        from kernel_agent.cli.references import eval_reference_points

        points = eval_reference_points(db, loaded, options, references.remeasure_references, references.compile_modes)
    speedup_vs = speedup_vs_json(over_baseline(verdict.speedup, verdict.speedup_ci, not_timed(verdict)), points)
    if json_output:
        sys.stdout.write(json_out.dumps({**verdict.to_dict(), "speedup_vs": speedup_vs}, default=str) + "\n")
    else:
        render(verdict, speedup_vs)
    raise typer.Exit(EXIT_OK if verdict.passed else EXIT_VERDICT)


def not_timed(verdict) -> str:
    return f"the candidate was not timed: {verdict.status}" + (f": {verdict.reason}" if verdict.reason else "")


def speed_line(timing: TimingResult | None) -> str:
    """The four-way class, what the design could have shown and what ended the timing; '' for a verdict timed
    before there were classes."""
    res = timing.resolution if timing is not None else None
    if timing is None or res is None or not res.speed_class:
        return ""
    shown = f"; smallest gain it could show (80% power): {res.mde:.1%}" if math.isfinite(res.mde) else ""
    pairs = timing.processes
    measured = (
        f"; process effect {timing.process_effect:.1%} measured over {pairs.pairs} process pairs"
        if pairs is not None and pairs.pairs > 1
        else f"; process effect {timing.process_effect:.0%} assumed (one pair"
        + (f": {pairs.why_one})" if pairs is not None and pairs.why_one else ")")
    )
    first = pairs.second_look_of if pairs is not None else None
    again = (
        f"; a second look: one pair read {first.speedup:.3f}x [{first.ci[0]:.3f}, {first.ci[1]:.3f}], could not resolve"
        if first is not None
        else ""
    )
    return f"speed: {res.speed_class} ({res.words or ''}){shown}; ended by {res.ended_by}{measured}{again}"


def render(verdict, speedup_vs: dict | None = None) -> None:
    colour = {"faster": "green", "correct": "cyan", "flagged": "yellow"}.get(verdict.status, "red")
    stdout.print(
        styled(
            verdict.status,
            f"bold {colour}",
            f"  {verdict.problem}  ({verdict.backend} on {verdict.device}; isolation: {verdict.isolation})",
        ),
        highlight=False,
    )
    if verdict.speedup is not None:
        low, high = verdict.speedup_ci
        timing = verdict.timing
        times = {role: typical_ms(timing, role) for role in ("baseline", "candidate")}
        sides = "  ".join(f"{role} {ms:.4f} ms" for role, ms in times.items() if ms is not None)
        many = timing is not None and len(timing.per_shape) > 1
        level, rounds = (timing.ci_level, timing.rounds) if timing is not None else ("95%", None)
        stdout.print(  # the times whose ratio is the speedup (a median pooled over shapes is not: 1.09x read 14.8/15.6)
            f"speedup {verdict.speedup:.3f}x  {level} CI [{low:.3f}, {high:.3f}]  {sides} "
            f"({'per-shape medians, geometric mean' if many else 'medians'}; {rounds} rounds)",
            highlight=False,
        )
        resolution_line = speed_line(timing)
        if resolution_line:
            stdout.print(resolution_line, highlight=False)
        for kind in ("eager", "compile"):
            entry = (speedup_vs or {}).get(kind) or {}
            if entry.get("value") is not None:
                low, high = entry["ci"]
                words = f"{entry['value']:.3f}x {kind}" + (", slower than torch" if slower(entry) else "")
                stdout.print(f"vs torch {kind}: {words}  CI [{low:.3f}, {high:.3f}]", highlight=False)
            elif entry:
                stdout.print(f"vs torch {kind}: - ({entry['reason']})", highlight=False)
    passed = sum(1 for c in verdict.checks if c.get("passed"))
    judged = sum(1 for c in verdict.checks if c.get("passed") is not None)
    unchecked = len(verdict.checks) - judged  # hard draws past the reference's own range, interpreter skips
    stdout.print(
        f"checks passed: {passed}/{judged}" + (f" ({unchecked} not checked)" if unchecked else ""), highlight=False
    )
    if verdict.reason:
        stdout.print(f"reason: {verdict.reason}", highlight=False)
