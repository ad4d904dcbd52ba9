"""Who may use a device when: timed runs alone, everything else together.

A timed run holds its device exclusively, so no other evaluation's compile,
correctness check or timing can disturb its clock; compiles and checks share
the device with each other. One gate per process, keyed by device name.

The gate also books host memory: each evaluation reserves what its footprint
needs (problem/footprint.py) before any process starts, and waits while the
evaluations already running have booked the rest. Each one's refusal only asks
whether it fits alone; two 15 GB KernelBench problems checked side by side on a
24 GB host would otherwise both pass it and meet the OOM killer together. "Alone"
is the host as it was when nothing was booked (`idle_budget`): read while another
evaluation holds 7 GB, MemAvailable would refuse a problem that fits once it ends.
When a booking ends, the C heap's free pages go back to the host (`return_free_heap`),
so that reading is not short by what this process freed and kept.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class DeviceGate:
    """A writer-preferring readers-writer lock per device, and a book of the host memory evaluations reserved."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._shared: dict[str, int] = {}
        self._exclusive: set[str] = set()
        self._waiting_exclusive: dict[str, int] = {}
        self._booked: list[int] = []
        self._host_budget = 0  # taken when the first booking of a busy spell is made

    def idle_budget(self, budget: Callable[[], int]) -> int:
        """What `budget()` reads with no evaluation booked: now if none is, else as read when the first one was."""
        with self._condition:
            return budget() if not self._booked else self._host_budget

    @contextmanager
    def host_memory(self, needed: int, budget: Callable[[], int]) -> Iterator[None]:
        """Hold `needed` bytes of host memory while the block runs; wait while other evaluations hold so much of
        `budget()` (read when nothing is booked: what is free with no evaluation running) that it would not fit.
        One that would not fit even alone goes ahead when it is alone: its refusal was decided before."""
        with self._condition:
            if not self._booked:
                self._host_budget = budget()
            while self._booked and sum(self._booked) + needed > self._host_budget:
                self._condition.wait()
            if not self._booked:
                self._host_budget = budget()
            self._booked.append(needed)
        try:
            yield
        finally:
            return_free_heap()
            with self._condition:
                self._booked.remove(needed)
                self._condition.notify_all()

    @contextmanager
    def shared(self, device: str) -> Iterator[None]:
        with self._condition:
            while device in self._exclusive or self._waiting_exclusive.get(device, 0):
                self._condition.wait()
            self._shared[device] = self._shared.get(device, 0) + 1
        try:
            yield
        finally:
            with self._condition:
                self._shared[device] -= 1
                self._condition.notify_all()

    @contextmanager
    def exclusive(self, device: str) -> Iterator[None]:
        with self._condition:
            self._waiting_exclusive[device] = self._waiting_exclusive.get(device, 0) + 1
            while device in self._exclusive or self._shared.get(device, 0):
                self._condition.wait()
            self._waiting_exclusive[device] -= 1
            self._exclusive.add(device)
        try:
            yield
        finally:
            with self._condition:
                self._exclusive.discard(device)
                self._condition.notify_all()


class NoGate:
    """The single-evaluation case: nothing to coordinate."""

    def idle_budget(self, budget: Callable[[], int]) -> int:
        return budget()

    @contextmanager
    def host_memory(self, needed: int, budget: Callable[[], int]) -> Iterator[None]:
        yield

    @contextmanager
    def shared(self, device: str) -> Iterator[None]:
        yield

    @contextmanager
    def exclusive(self, device: str) -> Iterator[None]:
        yield


def return_free_heap() -> None:
    """Give the C heap's free pages back to the host (glibc's `malloc_trim`; elsewhere nothing). An evaluation's
    gold, references and outputs, freed in an evaluation thread, stay in that thread's malloc arena otherwise:
    in the level-1 batch the orchestrator kept 2.6-5 GB between evaluations, and level1/82 (20.43 GB needed)
    was refused against the 19.51 GB that left available with nothing booked."""
    trim = getattr(_LIBC, "malloc_trim", None)
    if trim is not None:
        trim(0)


_LIBC = ctypes.CDLL(None)
