"""`kernel-agent eval PROBLEM CANDIDATE`: one trusted verdict."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.ceilings import profile_ceilings
from kernel_agent.cli.common import EXIT_OK, EXIT_VERDICT, fail, read_candidate, stdout, styled, warn
from kernel_agent.cli.options import fields_of, from_config
from kernel_agent.core.config import Device, EvalConfig


@from_config
def eval_command(
    problem: Path = typer.Argument(..., help="A problem folder (problem.py + kernel.py) or a KernelBench .py file."),
    candidate: Path = typer.Argument(..., help="The candidate kernel source file."),
    json_output: bool = opt.json_option("exactly one JSON verdict"),
    evaluation: EvalConfig = fields_of(skip=("sanity_speedup", "timing_rounds")),
    db: str = opt.DB,
) -> None:
    """Verify and time one candidate against a problem's baseline."""
    import torch

    from kernel_agent.evaluate.backends import BACKENDS
    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate, run_device
    from kernel_agent.problem.canaries import audit_problem
    from kernel_agent.problem.load import ProblemError, load_problem

    device = evaluation.device
    if device == Device.CUDA and not torch.cuda.is_available():
        fail("--device cuda: no CUDA device is visible here; use --device cpu or auto")
    if evaluation.backend is not None and evaluation.backend not in BACKENDS:
        fail(f"--backend must be one of {', '.join(BACKENDS)}, not {evaluation.backend!r}")
    if evaluation.timeout <= 0:
        fail("--timeout must be a positive number of seconds")
    source = read_candidate(candidate)
    try:
        loaded = load_problem(problem)
        for warning in audit_problem(loaded, run_device(loaded, device)):
            warn(warning)
    except ProblemError as exc:
        fail(str(exc))
    options = EvalOptions.from_config(evaluation)
    options.ceilings, _ = profile_ceilings(db, run_device(loaded, device), options.threads, remeasure=False)
    try:
        verdict = evaluate(loaded, source, options)
    except RuntimeError as exc:  # e.g. the requested isolation level is unavailable
        fail(str(exc))
    if json_output:
        sys.stdout.write(verdict.to_json() + "\n")
    else:
        render(verdict)
    raise typer.Exit(EXIT_OK if verdict.passed else EXIT_VERDICT)


def render(verdict) -> None:
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
        stdout.print(
            f"speedup {verdict.speedup:.3f}x  95% CI [{low:.3f}, {high:.3f}]  "
            f"baseline {timing['baseline']['median_ms']:.4f} ms  "
            f"candidate {timing['candidate']['median_ms']:.4f} ms (medians)",
            highlight=False,
        )
    passed = sum(1 for c in verdict.checks if c.get("passed"))
    stdout.print(f"checks passed: {passed}/{len(verdict.checks)}", highlight=False)
    if verdict.reason:
        stdout.print(f"reason: {verdict.reason}", highlight=False)
