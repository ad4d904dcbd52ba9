"""A sandbox's CPU per wall second, judged on the requests its speed is made of.

The speedup is a median of times, so it is made of the requests at or below each shape's median wall time.
CPU averaged over every request can be diluted: a candidate that sleeps in a few requests (slow ones, which the
median ignores) and burns a hidden core in the rest reads under one core per second on average. Over the
requests at or below the median, the idle ones are left out by the same rule that leaves them out of the speed,
so whatever buys the time shows in full. Each shape is judged alone: a shape whose requests are a small share of
the wall time cannot hide behind the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernel_agent.sandbox.host.session import Timed


@dataclass(frozen=True)
class CpuUse:
    """One side's sandbox CPU and wall time over the requests of one shape that make its median."""

    cpu_ns: int
    wall_ns: int
    requests: int

    @property
    def per_wall(self) -> float:
        return self.cpu_ns / self.wall_ns if self.wall_ns > 0 else 0.0


def median_half(requests: list[Timed]) -> list[Timed]:
    """The requests at or below the median wall time: the half the speed's median is made of."""
    if not requests:
        return []
    middle = float(np.median([t.wall_ns for t in requests]))
    return [t for t in requests if t.wall_ns <= middle]


def cpu_use(requests: list[Timed]) -> CpuUse:
    """CPU and wall time over the median half of one shape's requests."""
    kept = median_half(requests)
    return CpuUse(sum(t.cpu_ns for t in kept), sum(t.wall_ns for t in kept), len(kept))


def worst_shape(candidate: list[CpuUse], baseline: list[CpuUse], threads: int) -> int | None:
    """The shape whose candidate used the most CPU per wall second against what it may use there (the larger of
    the baseline's on that shape and the thread budget); None when no shape has timed requests on both sides."""
    best, index = -1.0, None
    for c, (cand, base) in enumerate(zip(candidate, baseline)):
        if cand.wall_ns <= 0 or base.wall_ns <= 0:
            continue
        excess = cand.per_wall / max(base.per_wall, float(threads or 1))
        if excess > best:
            best, index = excess, c
    return index
