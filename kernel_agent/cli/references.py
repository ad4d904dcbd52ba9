"""The reference points `eval` shows beside a verdict: stored once per problem and device fingerprint, as
`optimize` reads them (memo/references.py); without the database packages (the GPU machine) measured now
and not stored."""

from __future__ import annotations

from typing import Any

from kernel_agent.cli.common import fail, stderr, warn


def eval_reference_points(
    db: str | None, problem: Any, options: Any, remeasure: bool, compile_modes: list[str] | None = None
) -> dict[str, dict[str, Any]]:
    """eager, compile (and compile:MODE per extra mode) -> ReferencePoint JSON for this problem on this device."""
    from kernel_agent.cli.ceilings import database_here
    from kernel_agent.evaluate.pipeline import evaluate
    from kernel_agent.evaluate.references import references
    from kernel_agent.memo.references import reference_points

    kinds = references(compile_modes or [])
    database, why_not = database_here(db)
    stored = "stored for later runs" if database is not None else f"{why_not}: not stored"

    def announce(kind: object) -> None:
        stderr.print(f"measuring the torch {kind} reference point ({stored}) ...", highlight=False)

    since = None
    if remeasure and database is not None:
        from kernel_agent.db.models import utcnow

        since = utcnow()
    try:
        points = reference_points(database, problem, options, evaluate, since, announce, kinds)
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
