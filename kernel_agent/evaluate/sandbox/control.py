"""The trusted side's hold on a sandbox's processes: freeze, thaw, and account for their work.

Nothing the candidate says about its own process is believed. From outside its
process this module:
- freezes every sandbox process with SIGSTOP whenever it is not serving a request,
  and verifies from `/proc` that every thread is stopped before the trusted side
  writes the next call's inputs (native threads cannot work while it is idle);
- counts processes and threads from `/proc` (a native pthread is as visible as a
  Python thread);
- reads the CPU time of every thread of the sandbox, so each phase (loading, checks,
  warm-up, timed calls, idle) is accounted for: from the cgroup's `cpu.stat` where
  this machine lets us make a cgroup (exact, counts exited threads and children),
  else from each process's `/proc/PID/stat` (10 ms ticks).
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_V2 = Path("/sys/fs/cgroup/unified")
CGROUP_PARENT = "kernel-agent"
FREEZE_TIMEOUT_S = 2.0
CLOCK_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


class ControlError(RuntimeError):
    """The sandbox escaped the trusted side's control (one-line reason)."""


def _cgroup_root() -> Path | None:
    """A cgroup v2 folder this process may create children in, or None (then /proc alone)."""
    for root in (CGROUP_V2, Path("/sys/fs/cgroup")):
        if not (root / "cgroup.controllers").exists():
            continue  # not a cgroup v2 hierarchy
        parent = root / CGROUP_PARENT
        try:
            parent.mkdir(exist_ok=True)
            probe = parent / f"probe-{os.getpid()}"
            probe.mkdir(exist_ok=True)
            usable = (probe / "cpu.stat").exists() and (probe / "cgroup.procs").exists()
            probe.rmdir()
        except OSError:
            continue
        if usable:
            return parent
    return None


_ROOT: list[Path | None] = []


def cgroup_root() -> Path | None:
    if not _ROOT:
        _ROOT.append(_cgroup_root())
    return _ROOT[0]


def group_name(label: str) -> str:
    """`label-PID-random`: the orchestrator's PID in the name tells a live group from a stale one."""
    return f"{label}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _owner_alive(name: str) -> bool:
    """Whether the orchestrator that made this group still runs (older names without a PID: no)."""
    parts = name.rsplit("-", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Cgroup:
    """A cgroup v2 folder holding exactly one sandbox: membership and CPU time that no fork escapes."""

    def __init__(self, root: Path, label: str) -> None:
        self.path = root / group_name(label)
        self.path.mkdir()

    def join(self) -> None:
        """Move the calling process in (run between fork and exec, before any candidate code)."""
        with open(self.path / "cgroup.procs", "w") as handle:
            handle.write("0")

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def cpu_ns(self) -> int:
        for line in (self.path / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec"):
                return int(line.split()[1]) * 1000
        return 0

    def remove(self) -> None:
        """Kill whatever is left and delete the folder."""
        kill = self.path / "cgroup.kill"
        deadline = time.monotonic() + 5
        while self.pids() and time.monotonic() < deadline:
            if kill.exists():
                try:
                    kill.write_text("1")
                except OSError:
                    pass
            for pid in self.pids():
                _signal(pid, signal.SIGKILL)
            time.sleep(0.01)
        try:
            self.path.rmdir()
        except OSError:
            pass


V1_ROOT = Path("/sys/fs/cgroup")


class V1Group:
    """A cgroup v1 folder of one controller (cpuset pins the cores, pids records the peak task count).

    Optional: where the machine has no writable v1 hierarchy, the accounting rules stand alone."""

    def __init__(self, controller: str, label: str) -> None:
        parent = V1_ROOT / controller / CGROUP_PARENT
        parent.mkdir(exist_ok=True)
        if controller == "cpuset":  # a v1 cpuset must have cpus and mems before anything joins it
            for name in ("cpuset.cpus", "cpuset.mems"):
                if not (parent / name).read_text().strip():
                    (parent / name).write_text((parent.parent / name).read_text().strip())
        self.path = parent / group_name(label)
        self.path.mkdir()
        if controller == "cpuset":
            (self.path / "cpuset.mems").write_text((parent / "cpuset.mems").read_text().strip())
            (self.path / "cpuset.cpus").write_text((parent / "cpuset.cpus").read_text().strip())

    @classmethod
    def make(cls, controller: str, label: str) -> V1Group | None:
        if controller in os.environ.get("KERNEL_AGENT_NO_CGROUP_V1", "").split(","):
            return None
        try:
            return cls(controller, label)
        except OSError:
            return None

    def write(self, name: str, value: str) -> None:
        (self.path / name).write_text(value)

    def read(self, name: str) -> str:
        return (self.path / name).read_text().strip()

    def join(self) -> None:
        with open(self.path / "cgroup.procs", "w") as handle:
            handle.write(str(os.getpid()))

    def remove(self) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.01)


_CLEANED: list[bool] = []


def clean_stale_cgroups() -> None:
    """Remove empty sandbox cgroups an earlier, killed orchestrator left behind (once per process).

    Only groups whose orchestrator is gone: another orchestrator's group is empty for a moment between
    its creation and its worker joining it, and removing it then failed that worker's start."""
    if _CLEANED:
        return
    _CLEANED.append(True)
    parents = [cgroup_root(), *(V1_ROOT / controller / CGROUP_PARENT for controller in ("cpuset", "pids"))]
    for parent in parents:
        if parent is None or not parent.is_dir():
            continue
        for child in parent.iterdir():
            if not child.is_dir() or _owner_alive(child.name):
                continue
            try:
                if not (child / "cgroup.procs").read_text().split():
                    child.rmdir()
            except OSError:
                pass


@dataclass
class Usage:
    """What the sandbox looked like at one frozen moment."""

    cpu_ns: int
    processes: int
    threads: int


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


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


def _threads_stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in "tTZXx":
            return False
    return True


class ProcessControl:
    """Freeze, thaw and measure every process of one sandbox.

    `helpers` are the trusted launcher's own processes (bubblewrap's monitor and init),
    recorded before any candidate code ran; every other process in the sandbox is the
    worker or something it started."""

    def __init__(self, launcher_pid: int, cgroup: Cgroup | None) -> None:
        self.launcher_pid = launcher_pid
        self.cgroup = cgroup
        self.helpers: set[int] = {launcher_pid}
        self.worker_pid: int | None = None
        self.frozen = False
        self._ticks_seen: dict[int, int] = {}

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
        """SIGSTOP every untrusted process and wait until every one of their threads is stopped."""
        deadline = time.monotonic() + FREEZE_TIMEOUT_S
        stopped: set[int] = set()
        while True:
            pids = self.untrusted()
            fresh = [pid for pid in pids if pid not in stopped]
            for pid in fresh:
                _signal(pid, signal.SIGSTOP)
                stopped.add(pid)
            if not fresh and all(_threads_stopped(pid) for pid in pids):
                break
            if time.monotonic() > deadline:
                raise ControlError(f"the sandbox could not be frozen within {FREEZE_TIMEOUT_S:.0f} s")
            time.sleep(0)
        self.frozen = True

    def thaw(self) -> None:
        for pid in self.untrusted():
            _signal(pid, signal.SIGCONT)
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
                read = _state_and_ticks(pid)
                if read is not None:
                    self._ticks_seen[pid] = read[1]
            cpu = sum(self._ticks_seen.values()) * CLOCK_TICK_NS  # exited processes keep their last count
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
        return "cgroup cpu.stat" if self.cgroup is not None else "/proc stat ticks"

    def kill(self) -> None:
        """SIGKILL every process of the sandbox (it ends stopped processes too)."""
        for pid in self.members():
            _signal(pid, signal.SIGKILL)
