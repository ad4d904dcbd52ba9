"""The trusted side's hold on a sandbox's processes: freeze, thaw, and account for their work.

Nothing the candidate says about its own process is believed. From outside its
process this module:
- freezes every sandbox process whenever it is not serving a request (the cgroup
  freezer where there is one, else SIGSTOP), and verifies that every thread is
  stopped before the trusted side writes the next call's inputs (native threads
  cannot work while it is idle);
- counts processes and threads from `/proc` (a native pthread is as visible as a
  Python thread);
- reads the CPU time of every thread of the sandbox, so each phase (loading, checks,
  warm-up, timed calls, idle) is accounted for: from the cgroup's `cpu.stat` where
  this machine lets us make a cgroup (exact, counts exited threads and children),
  else from `/proc` (`ProcCpu`: each thread's run time, held to its process's ticks).
The cgroup folders themselves are `cgroups.py`.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernel_agent.sandbox.host.cgroups import Cgroup, V1Group, send_signal

FREEZE_TIMEOUT_S = 2.0
CLOCK_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class ControlError(RuntimeError):
    """The sandbox escaped the trusted side's control (one-line reason)."""


@dataclass
class Usage:
    """What the sandbox looked like at one frozen moment."""

    cpu_ns: int
    processes: int
    threads: int


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as handle:
                found += [int(c) for c in handle.read().split()]
        except OSError:
            continue
    return found


def _state_and_ticks(pid: int) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields[0] is field 3 (state); utime, stime, cutime, cstime are fields 14-17.
    return fields[0], sum(int(v) for v in fields[11:15])


class ProcCpu:
    """The sandbox's CPU without a cgroup, in ns: each process's threads' run times (schedstat), held within
    four ticks above the kernel's own whole-process count (utime, stime and the reaped children's two, each
    truncated to a tick; dead threads included). Ticks alone are too coarse: a 5 ms timed call reads 0 or
    10 ms. What the threads' sum misses (threads that died unseen) is carried as a per-process offset, lifted
    whenever the count passes it, so nothing hides more than the count's own truncation. A read costs the live
    threads only: a thread gone since the last read is folded into its process's `dead` total."""

    def __init__(self) -> None:
        self.live: dict[int, dict[int, int]] = {}  # pid -> tid -> the thread's run time at the last read
        self.dead: dict[int, int] = {}  # pid -> the last run times of its threads gone since
        self.offset: dict[int, int] = {}
        self.last: dict[int, int] = {}  # pid -> its CPU at the last read (exited processes keep it)

    def read(self, pid: int) -> None:
        read = _state_and_ticks(pid)
        if read is None:
            return
        floor = read[1] * CLOCK_TICK_NS
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            tasks = []
        live: dict[int, int] = {}
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as handle:
                    live[int(tid)] = int(handle.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        before = self.live.get(pid, {})
        self.dead[pid] = self.dead.get(pid, 0) + sum(ns for tid, ns in before.items() if tid not in live)
        self.live[pid] = live
        precise = self.dead[pid] + sum(live.values())
        offset = self.offset.get(pid, 0)
        offset = min(max(offset, floor - precise), floor + 4 * CLOCK_TICK_NS - precise)
        self.offset[pid] = offset
        self.last[pid] = precise + offset

    def total(self) -> int:
        return sum(self.last.values())


def _thread_states(pid: int) -> list[str]:
    """Each thread's state letter from /proc (none for a process that is gone)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    states = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as handle:
                states.append(handle.read().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    return states


def _threads_stopped(pid: int) -> bool:
    return all(state in "tTZXx" for state in _thread_states(pid))


def _resumed(pid: int) -> bool:
    """A thread running or in interruptible sleep after SIGSTOP resumed (a stop ends such a sleep); one in
    uninterruptible sleep (D, slow I/O) has not stopped yet, which is not an escape."""
    return any(state in "RS" for state in _thread_states(pid))


class CgroupFreezer:
    """cgroup v2 `cgroup.freeze` over the sandbox's whole cgroup. A frozen task runs for nothing: not for a
    SIGCONT from a timer it armed itself, which resumes a SIGSTOPped one."""

    name = "cgroup v2 freezer"

    def __init__(self, path: Path) -> None:
        self.path = path

    def freeze(self, _pids: Callable[[], list[int]]) -> None:
        (self.path / "cgroup.freeze").write_text("1")
        _wait(self.holds)

    def thaw(self, _pids: Callable[[], list[int]]) -> None:
        (self.path / "cgroup.freeze").write_text("0")

    def holds(self, _pids: Callable[[], list[int]] | None = None) -> bool:
        try:
            return "frozen 1" in (self.path / "cgroup.events").read_text()
        except OSError:
            return True  # the group is gone: nothing of the sandbox runs


class V1Freezer:
    """A cgroup v1 `freezer` group the sandbox joined before exec (where v2 has no freezer)."""

    name = "cgroup v1 freezer"

    def __init__(self, group: V1Group) -> None:
        self.group = group

    def freeze(self, _pids: Callable[[], list[int]]) -> None:
        self.group.write("freezer.state", "FROZEN")
        _wait(self.holds)

    def thaw(self, _pids: Callable[[], list[int]]) -> None:
        self.group.write("freezer.state", "THAWED")

    def holds(self, _pids: Callable[[], list[int]] | None = None) -> bool:
        try:
            return self.group.read("freezer.state") == "FROZEN"
        except OSError:
            return True


class SignalFreezer:
    """SIGSTOP to every untrusted process, until /proc shows every thread stopped: the fallback. A process
    that resumes itself (a timer delivering SIGCONT) is seen running at the next thaw, or by the idle-CPU
    budget."""

    name = "SIGSTOP"

    def freeze(self, pids: Callable[[], list[int]]) -> None:
        stopped: set[int] = set()

        def settled() -> bool:
            current = pids()
            fresh = [pid for pid in current if pid not in stopped]
            for pid in fresh:
                send_signal(pid, signal.SIGSTOP)
                stopped.add(pid)
            return not fresh and all(_threads_stopped(pid) for pid in current)

        try:
            _wait(settled)
        except ControlError:
            if any(_resumed(pid) for pid in stopped):
                raise ControlError(
                    "the sandbox escaped the freezer (SIGSTOP): a stopped process kept resuming itself"
                ) from None
            raise

    def thaw(self, pids: Callable[[], list[int]]) -> None:
        for pid in pids():
            send_signal(pid, signal.SIGCONT)

    def holds(self, pids: Callable[[], list[int]] | None = None) -> bool:
        return pids is None or all(_threads_stopped(pid) for pid in pids())


Freezer = CgroupFreezer | V1Freezer | SignalFreezer


def _wait(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + FREEZE_TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise ControlError(f"the sandbox could not be frozen within {FREEZE_TIMEOUT_S:.0f} s")
        time.sleep(0)


def v2_freezer(cgroup: Cgroup | None) -> CgroupFreezer | None:
    return CgroupFreezer(cgroup.path) if cgroup is not None and (cgroup.path / "cgroup.freeze").exists() else None


class ProcessControl:
    """Freeze, thaw and measure every process of one sandbox.

    `helpers` are the trusted launcher's own processes (bubblewrap's monitor and init),
    recorded before any candidate code ran; every other process in the sandbox is the
    worker or something it started."""

    def __init__(self, launcher_pid: int, cgroup: Cgroup | None, freezer: Freezer | None = None) -> None:
        self.launcher_pid = launcher_pid
        self.cgroup = cgroup
        self.freezer: Freezer = freezer or SignalFreezer()
        self.helpers: set[int] = {launcher_pid}
        self.worker_pid: int | None = None
        self.frozen = False
        self._proc_cpu = ProcCpu()  # where there is no cgroup to read

    # ---- membership ----------------------------------------------------------------
    def members(self) -> list[int]:
        """Every process of the sandbox (the launcher's helpers included)."""
        if self.cgroup is not None:
            return self.cgroup.pids()
        found, todo = [], [self.launcher_pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo += _children(pid)
        return found

    def adopt_worker(self) -> int:
        """Record the launcher's own processes and the one worker process, before the candidate runs.

        The worker is the deepest process of the launch chain (bwrap monitor -> bwrap init -> python)."""
        chain = [self.launcher_pid]
        while True:
            kids = _children(chain[-1])
            if len(kids) != 1:
                break
            chain.append(kids[0])
        self.worker_pid = chain[-1]
        self.helpers = set(chain[:-1])
        return self.worker_pid

    def untrusted(self) -> list[int]:
        return [pid for pid in self.members() if pid not in self.helpers]

    # ---- freezing ------------------------------------------------------------------
    def freeze(self) -> None:
        """Freeze every untrusted process and wait until the freezer says all of them are."""
        self.freezer.freeze(self.untrusted)
        self.frozen = True

    def thaw(self) -> None:
        """Let the sandbox run, after checking it stayed frozen all along (a SIGSTOPped process can resume
        itself; a cgroup-frozen one cannot)."""
        if not self.freezer.holds(self.untrusted):
            raise ControlError(f"the sandbox escaped the freezer ({self.freezer.name}): it was running while frozen")
        self.freezer.thaw(self.untrusted)
        self.frozen = False

    # ---- accounting ----------------------------------------------------------------
    def usage(self) -> Usage:
        """CPU time, processes and threads of everything untrusted in the sandbox (read while frozen)."""
        pids = self.untrusted()
        threads = 0
        for pid in pids:
            try:
                threads += len(os.listdir(f"/proc/{pid}/task"))
            except OSError:
                continue
        if self.cgroup is not None:
            cpu = self.cgroup.cpu_ns()
        else:
            for pid in pids:
                self._proc_cpu.read(pid)
            cpu = self._proc_cpu.total()
        return Usage(cpu_ns=cpu, processes=len(pids), threads=threads)

    def peak_rss_bytes(self) -> int:
        """The largest peak resident set (VmHWM) of the sandbox's untrusted processes so far."""
        peak = 0
        for pid in self.untrusted():
            try:
                with open(f"/proc/{pid}/status") as handle:
                    for line in handle:
                        if line.startswith("VmHWM:"):
                            peak = max(peak, int(line.split()[1]) * 1024)
            except (OSError, ValueError):
                continue
        return peak

    def huge_pages_kb(self) -> int:
        """Anonymous huge pages the untrusted processes hold (the A/A evidence that both sides' heaps are alike)."""
        total = 0
        for pid in self.untrusted():
            try:
                with open(f"/proc/{pid}/smaps_rollup") as handle:
                    for line in handle:
                        if line.startswith("AnonHugePages:"):
                            total += int(line.split()[1])
            except (OSError, ValueError):
                continue
        return total

    def accounting(self) -> str:
        return "cgroup cpu.stat" if self.cgroup is not None else "/proc schedstat"

    def kill(self) -> None:
        """SIGKILL every process of the sandbox (it ends stopped processes too)."""
        for pid in self.members():
            send_signal(pid, signal.SIGKILL)
