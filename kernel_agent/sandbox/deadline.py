"""One side's time allowance: `--timeout` seconds of its own, paused while it waits on others.

Each side (the candidate, the baseline) has one `Deadline`, started when its work starts; its build, its
sessions and every wait read what remains of it, so no clock is restated or edited from outside. Only
its owner pauses it, around the waits that are not the side's own doing (host memory, the device).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class Deadline:
    def __init__(self, seconds: float, clock=time.monotonic) -> None:
        self.seconds = seconds
        self._clock = clock
        self._started: float | None = None
        self._paused = 0.0  # seconds of finished pauses
        self._pause_began: float | None = None

    def start(self) -> Deadline:
        """Start the allowance (once; later calls change nothing)."""
        if self._started is None:
            self._started = self._clock()
        return self

    def at(self) -> float:
        """The moment (on the clock) the allowance ends, counting a pause under way as not yet spent."""
        now = self._clock()
        started = self._started if self._started is not None else now
        ongoing = now - self._pause_began if self._pause_began is not None else 0.0
        return started + self.seconds + self._paused + ongoing

    def left(self) -> float:
        return max(0.0, self.at() - self._clock())

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside is not the side's: a wait for memory, the device, or the other side."""
        if self._pause_began is not None:  # already paused by an enclosing wait
            yield
            return
        self._pause_began = self._clock()
        try:
            yield
        finally:
            self._paused += self._clock() - self._pause_began
            self._pause_began = None
