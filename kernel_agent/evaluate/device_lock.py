"""Who may use a device when: timed runs alone, everything else together.

A timed run holds its device exclusively, so no other evaluation's compile,
correctness check or timing can disturb its clock; compiles and checks share
the device with each other. One gate per process, keyed by device name.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class DeviceGate:
    """A writer-preferring readers-writer lock per device."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._shared: dict[str, int] = {}
        self._exclusive: set[str] = set()
        self._waiting_exclusive: dict[str, int] = {}

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

    @contextmanager
    def shared(self, device: str) -> Iterator[None]:
        yield

    @contextmanager
    def exclusive(self, device: str) -> Iterator[None]:
        yield
