"""The plan a resumed run runs with: its stored plan, where each option typed again replaces the stored value.

Every option of the first sitting is stored with the run (`RunPlan.to_json`), so `--resume RUN` alone needs
nothing else. An option typed again with another value replaces the stored one, and the resume says so in one
line: a resumed run used to keep only its workers, executor and memory budget, and evaluated silently with
the stored `--timeout` where the user had typed another. The new plan is stored, so a later
resume keeps it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from kernel_agent.core.config import ExecutorKind, flag_of, option_leaves
from kernel_agent.optimize.config import RunPlan

# The run's kernels were made one per listed device when it started: another list would not match them.
FIXED = ("devices",)


class ReplanError(ValueError):
    """An option typed on resume that a stored run cannot take (one line for the user)."""


@dataclass(frozen=True)
class Replaced:
    """One stored option the resume replaces: its flag, the stored value and the typed one, as a user writes them."""

    flag: str
    stored: str
    typed: str

    def __str__(self) -> str:
        return f"{self.typed} replaces the stored {self.stored}"


def replan(stored: RunPlan, typed: RunPlan, given: frozenset[str]) -> tuple[RunPlan, list[Replaced]]:
    """`stored` with the value of every option named in `given` (the fields typed on the command line) taken
    from `typed`; with what changed, in declaration order."""
    plan, changes = stored, []
    for path, field, _ in option_leaves(RunPlan):
        if field.name not in given:
            continue
        old, new = _get(plan, path, field.name), _get(typed, path, field.name)
        if new == old:
            continue
        if field.name in FIXED:
            raise ReplanError(
                f"{flag_of(field).split('/')[0]} cannot change on resume (the run's kernels were made one per "
                f"listed device: {_shown(field, old)}); start a new run for other devices"
            )
        plan = _with(plan, path, field.name, new)
        changes.append(Replaced(flag_of(field).split("/")[0], _shown(field, old), _shown(field, new)))
    return _executor_follows(plan, stored, given, changes)


def summary(run_id: int, changes: list[Replaced]) -> str:
    """The one line a resume prints when options replace stored ones."""
    return f"run {run_id}: " + ", ".join(str(c) for c in changes) + " (every other option as stored)"


def _executor_follows(
    plan: RunPlan, stored: RunPlan, given: frozenset[str], changes: list[Replaced]
) -> tuple[RunPlan, list[Replaced]]:
    """A Ray address typed alone moves the run to Ray; the local executor has no address."""
    if "ray_address" in given and "executor" not in given and plan.ray_address and plan.executor != ExecutorKind.RAY:
        plan = dataclasses.replace(plan, executor=ExecutorKind.RAY)
        changes.append(Replaced("--executor", f"--executor {stored.executor}", f"--executor {ExecutorKind.RAY}"))
    if plan.executor != ExecutorKind.RAY and plan.ray_address is not None:
        plan = dataclasses.replace(plan, ray_address=None)
    return plan, changes


def _get(record: Any, path: tuple[str, ...], name: str) -> Any:
    for part in path:
        record = getattr(record, part)
    return getattr(record, name)


def _with(record: Any, path: tuple[str, ...], name: str, value: Any) -> Any:
    """A copy of `record` with one field changed somewhere below it (records may be frozen)."""
    if not path:
        return dataclasses.replace(record, **{name: value})
    return dataclasses.replace(record, **{path[0]: _with(getattr(record, path[0]), path[1:], name, value)})


def _shown(field: dataclasses.Field, value: Any) -> str:
    """The option as a user types it: `--timeout 60`, `--no-references`, `--threads` for its default."""
    flag = flag_of(field)
    if isinstance(value, bool):
        on, _, off = flag.partition("/")
        return on if value else (off or f"no {on}")
    if value is None or value == []:
        return f"{flag} (default)"
    if isinstance(value, list):
        return " ".join(f"{flag} {v}" for v in value)
    if isinstance(value, (Enum, Path)):
        value = str(value)
    return f"{flag} {value:g}" if isinstance(value, float) else f"{flag} {value}"
