"""The abstain rule (Inductor AutoHeuristic's "unsure" path): when a selector's confidence is below a threshold,
time its top k predicted configs and keep the fastest, instead of trusting the pick."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kernel_agent.core.tuning import Shape
from kernel_agent.select.base import Pick, Selector

Timer = Callable[[Shape, list[str]], dict[str, float]]  # shape, configs -> the times of those that ran
K = 2  # configs timed when unsure
BELOW = 0.5  # the confidence under which a selector is unsure


class Abstaining:
    """Wraps a fitted selector; `timer` times configs (the sandbox in use, the stored rows when scoring)."""

    def __init__(self, base: Selector, k: int = K, threshold: float = BELOW) -> None:
        self.base, self.k, self.threshold = base, k, threshold
        self.name = f"{base.name}+abstain(k={k},<{threshold:g})"

    @property
    def seen_shapes(self) -> set[Shape]:
        return self.base.seen_shapes

    def to_time(self, pick: Pick) -> list[str]:
        """What deciding costs: nothing for a confident pick (a search times it once), else the top k."""
        return [] if pick.confidence >= self.threshold else list(pick.ranking[: self.k])

    def select(self, shape: Shape, timer: Timer) -> Pick:
        pick = self.base.select(shape)
        top = self.to_time(pick)
        if not top:
            return pick
        times = timer(shape, top)
        if not times:
            return replace(pick, timed=tuple(top), abstained=True)
        fastest = min(times, key=times.__getitem__)
        return replace(pick, config=fastest, timed=tuple(top), abstained=True)
