"""`optimize --selector`: which configs the search provider times first for a kernel, from a selector fitted on
every row `kernel-agent tune` stored for its baseline on this device. No rows, no advice: the
plain hill climb, as before."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kernel_agent.core.config import SelectorChoice
from kernel_agent.core.tuning import Config
from kernel_agent.problem.load import Problem

if TYPE_CHECKING:
    from kernel_agent.db.session import Database


@dataclass(frozen=True)
class Advice:
    """The configs to time first, best first, and one line saying where they came from (or why there are none);
    `decision` is the part of them that trusting the selector times (`optimize --trust-selector`)."""

    configs: list[Config] = field(default_factory=list)
    note: str = ""
    decision: list[Config] = field(default_factory=list)


def advise(db: Database, problem: Problem, device: str, threads: int, choice: SelectorChoice) -> Advice:
    """The search order of `choice`'s selector for the problem's benchmark shapes (its first dtype)."""
    if choice is SelectorChoice.NONE or not problem.tunables:
        return Advice()
    from kernel_agent.db.tuning import VariantKey, stored_times
    from kernel_agent.db.writes import problem_hash, sha256
    from kernel_agent.measure.ceilings import fingerprint_key
    from kernel_agent.select import stored
    from kernel_agent.select.prior import decision, search_order

    key = VariantKey(
        problem.name, problem_hash(problem), sha256(problem.baseline_source), fingerprint_key(device, threads),
        problem.dtypes[0],
    )  # fmt: skip
    rows = stored_times(db, key)
    if not rows:
        if choice is SelectorChoice.AUTO:
            return Advice()
        return Advice(note=f"--selector {choice}: no tuning rows for this baseline on this device "
                      f"(kernel-agent tune {problem.path}): plain search")  # fmt: skip
    found = stored.load(db, problem, problem.baseline_source, key, threads, rows)
    selector = _selector(SelectorChoice.NEAREST if choice is SelectorChoice.AUTO else choice)
    if selector is None:
        return Advice(note="--selector lightgbm: lightgbm is not installed (pip install 'kernel-agent[select]'): "
                      "plain search")  # fmt: skip
    selector.fit(found.table, found.context)
    benchmark = [tuple(shape) for shape in problem.shapes]
    configs, decided = search_order(selector, benchmark), decision(selector, benchmark)
    note = (
        f"search order from the {selector.name} selector, fitted on the tuning rows of {len(found.table.shapes)} "
        f"shape(s) on this device: {len(configs)} config(s) first, {len(decided)} of them its decision"
    )
    return Advice(configs, note, decided)


def _selector(choice: SelectorChoice):  # noqa: ANN202 - a Selector, imported late (lightgbm is optional)
    if choice is SelectorChoice.NEAREST:
        from kernel_agent.select.nearest import NearestShape

        return NearestShape()
    if choice is SelectorChoice.ANALYTICAL:
        from kernel_agent.select.analytical import Analytical

        return Analytical()
    from kernel_agent.select.ranker import Ranker, available

    return Ranker() if available() else None
