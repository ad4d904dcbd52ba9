"""The reference points `eval` shows beside a verdict: stored once per problem and device fingerprint, like
the ceilings (cli/ceilings.py); without the database packages (the GPU machine) measured now and not stored."""

from __future__ import annotations

from typing import Any

from kernel_agent.cli.common import fail, stderr, warn
from kernel_agent.cli.options import open_db


def eval_reference_points(
    db: str | None, problem: Any, options: Any, remeasure: bool, compile_modes: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """eager, compile (and compile:MODE per extra mode) -> ReferencePoint JSON for this problem on this device."""
    from kernel_agent.evaluate.pipeline import evaluate
    from kernel_agent.evaluate.references import measure_reference, references

    kinds = references(compile_modes or [])

    def announce(kind: object) -> None:
        stderr.print(f"measuring the torch {kind} reference point (stored for later runs) ...", highlight=False)

    try:
        from kernel_agent.db.models import utcnow
        from kernel_agent.optimize.references import reference_points
    except ImportError as exc:
        stderr.print(f"measuring reference points ({exc.name} is not installed: not stored) ...", highlight=False)
        return {kind.value: measure_reference(problem, kind, options)[0].to_json() for kind in kinds}
    try:
        since = utcnow() if remeasure else None
        points = reference_points(open_db(db), problem, options, evaluate, since, announce, kinds)
    except RuntimeError as exc:  # e.g. the requested isolation level is unavailable
        warn(f"no reference points: {exc}")
        return {}
    return {kind.value: point.to_json() for kind, point in points.items()}


def check_compile_modes(modes: list[str]) -> None:
    """An unknown --compile-mode is a usage error before anything runs."""
    from kernel_agent.evaluate.references import references

    try:
        references(modes)
    except ValueError as exc:
        fail(f"--compile-mode: {exc}")
