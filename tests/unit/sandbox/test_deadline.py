"""One side's allowance (sandbox/deadline.py) on a clock the test turns by hand."""

from __future__ import annotations

from kernel_agent.sandbox.deadline import Deadline


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_waits_pause_the_allowance_and_nothing_else_does() -> None:
    clock = Clock()
    deadline = Deadline(10.0, clock).start()
    clock.now += 3  # its own work
    with deadline.paused():  # a wait for memory or the device
        clock.now += 50
        assert deadline.left() == 7.0  # nothing spent while it waits
    clock.now += 2
    assert deadline.left() == 5.0 and deadline.at() == 100 + 10 + 50


def test_a_pause_inside_a_pause_counts_once_and_start_is_idempotent() -> None:
    clock = Clock()
    deadline = Deadline(10.0, clock)
    assert deadline.left() == 10.0  # not started: the whole allowance is ahead
    deadline.start()
    clock.now += 4
    deadline.start()
    with deadline.paused():
        with deadline.paused():
            clock.now += 5
        clock.now += 5
    assert deadline.left() == 6.0
    clock.now += 7
    assert deadline.left() == 0.0
