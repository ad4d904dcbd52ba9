"""The sandbox's CPU where no cgroup counts it (unprivileged runs without bubblewrap): read from /proc, it must
be as precise as a timed call is short, and must not lose the CPU of threads that died between reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from kernel_agent.sandbox.host.control import CLOCK_TICK_NS, ProcCpu

# Each round: burn about 3 ms of CPU (inline, in a thread that ends before the stop, or in one that is seen alive
# at the stop and ends in the next round), print the process's own CPU clock, stop until continued.
CHILD = r"""
import os, signal, sys, threading, time

def burn(ns):
    end = time.thread_time_ns() + ns
    while time.thread_time_ns() < end:
        pass

mode = sys.argv[1]
previous = None
for _ in range(int(sys.argv[2])):
    if mode == "threads":  # each thread ends before the stop: never seen alive
        worker = threading.Thread(target=burn, args=(3_000_000,))
        worker.start()
        worker.join()
    elif mode == "across":  # each thread is seen alive at one stop and has ended by the next
        if previous is not None:
            previous[1].set()
            previous[0].join()
        done = threading.Event()
        worker = threading.Thread(target=lambda d=done: (burn(3_000_000), d.wait()))
        worker.start()
        time.sleep(0.02)  # its burn is over (3 ms of CPU); it waits alive for the next round
        previous = (worker, done)
    else:
        burn(3_000_000)
    print(time.process_time_ns(), flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
"""


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0] == "T"


def _rounds(mode: str, rounds: int) -> list[tuple[int, int]]:
    """(the child's own CPU clock, ProcCpu's reading) at each stop."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(rounds)], stdout=subprocess.PIPE, text=True)
    cpu, seen = ProcCpu(), []
    try:
        for _ in range(rounds):
            own = int(child.stdout.readline())
            deadline = time.monotonic() + 10
            while not _stopped(child.pid):
                assert time.monotonic() < deadline, "the child did not stop"
                time.sleep(0.001)
            cpu.read(child.pid)
            seen.append((own, cpu.total()))
            os.kill(child.pid, signal.SIGCONT)
    finally:
        child.kill()
        child.wait()
    return seen


@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="this kernel has no schedstat")
def test_each_short_call_is_read_to_well_under_a_tick() -> None:
    seen = _rounds("inline", 12)
    for (own_before, read_before), (own_after, read_after) in zip(seen, seen[1:]):
        # about 3 ms each round: clock ticks alone read 0 or 10 ms (and sometimes 20)
        assert abs((read_after - read_before) - (own_after - own_before)) < 1_000_000, seen


def test_threads_that_died_between_reads_are_not_lost() -> None:
    seen = _rounds("threads", 8)
    for own, read in seen:
        # the kernel's whole-process count truncates utime and stime to a tick each: nothing hides more
        assert read >= own - 2 * CLOCK_TICK_NS, seen
    growth_read, growth_own = seen[-1][1] - seen[0][1], seen[-1][0] - seen[0][0]
    assert growth_read >= growth_own - 2 * CLOCK_TICK_NS, seen


@pytest.mark.skipif(not os.path.exists("/proc/self/schedstat"), reason="this kernel has no schedstat")
def test_a_thread_seen_alive_keeps_its_time_after_it_ends() -> None:
    seen = _rounds("across", 8)
    for (own_before, read_before), (own_after, read_after) in zip(seen, seen[1:]):
        assert abs((read_after - read_before) - (own_after - own_before)) < 1_000_000, seen
