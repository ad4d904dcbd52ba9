"""A sandbox's CPU per wall second, judged on the requests its speed is made of.

The speedup is a median of times, so it is made of the requests at or below each shape's median wall time.
CPU averaged over every request can be diluted: a candidate that sleeps in a few requests (slow ones, which the
median ignores) and burns a hidden core in the rest reads under one core per second on average. Over the
requests at or below the median, the idle ones are left out by the same rule that leaves them out of the speed,
so whatever buys the time shows in full. Each shape is judged alone: a shape whose requests are a small share of
the wall time cannot hide behind the others.

The CPU of a request runs from thaw to frozen again, its wall time to the reply: the sandbox runs on until the
freeze lands, and an honest OpenMP kernel's threads spin-wait there (cpp_matmul's faster candidate at two threads
read 2.2-2.9 CPU per wall second at `unshare`, and 6 of 12 of its verdicts were rejected). So each request's wall
time is counted on past the reply, up to twice the trusted baseline's median of that stretch on the same shape
(`after_reply_cap`): not to the freeze itself, which a thread stuck in the kernel could delay.
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


def after_reply_cap(baseline: list[Timed]) -> int:
    """How long past its reply a request's wall time may count (ns): twice the baseline's median time from reply
    to frozen on this shape."""
    if not baseline:
        return 0
    return int(2 * float(np.median([max(0, t.window_ns - t.wall_ns) for t in baseline])))


def cpu_use(requests: list[Timed], cap_ns: int = 0) -> CpuUse:
    """CPU and wall time over the median half of one shape's requests, each request's wall time counted on past
    its reply for at most `cap_ns` (`after_reply_cap`)."""
    kept = median_half(requests)
    wall = sum(t.wall_ns + min(max(0, t.window_ns - t.wall_ns), cap_ns) for t in kept)
    return CpuUse(sum(t.cpu_ns for t in kept), wall, len(kept))


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
