"""Cgroup folders for sandboxes: the v2 hierarchy this process may use, the v1 controllers' folders, the
names that tell a live orchestrator's group from a stale one, and the removal of what a killed one left.

Which of them one sandbox joins, and what each reports, is `groups.py`; freezing and accounting through
them is `control.py`.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

CGROUP_V2 = Path("/sys/fs/cgroup/unified")
CGROUP_PARENT = "kernel-agent"


def _cgroup_root() -> Path | None:
    """A cgroup v2 folder this process may create children in, or None (then /proc alone)."""
    for root in (CGROUP_V2, Path("/sys/fs/cgroup")):
        if not (root / "cgroup.controllers").exists():
            continue  # not a cgroup v2 hierarchy
        parent = root / CGROUP_PARENT
        try:
            make_parent(parent)
            probe = parent / f"probe-{os.getpid()}"
            probe.mkdir(exist_ok=True)
            usable = (probe / "cpu.stat").exists() and (probe / "cgroup.procs").exists()
            probe.rmdir()
        except OSError:
            continue
        if usable:
            return parent
    return None


def make_parent(parent: Path) -> None:
    """The shared `kernel-agent` folder of one hierarchy, 0755 whatever the umask of the run that made it:
    a root run under umask 077 must not leave a folder a later user's run cannot even list."""
    try:
        parent.mkdir()
    except FileExistsError:
        return
    os.chmod(parent, 0o755)


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
                send_signal(pid, signal.SIGKILL)
            time.sleep(0.01)
        try:
            self.path.rmdir()
        except OSError:
            pass


V1_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("cpuset", "pids", "memory", "freezer")  # the v1 groups a sandbox may get


class V1Group:
    """A cgroup v1 folder of one controller (cpuset pins the cores, pids records the peak task count).

    Optional: where the machine has no writable v1 hierarchy, the accounting rules stand alone."""

    def __init__(self, controller: str, label: str) -> None:
        parent = V1_ROOT / controller / CGROUP_PARENT
        make_parent(parent)
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
    parents = [cgroup_root(), *(V1_ROOT / controller / CGROUP_PARENT for controller in V1_CONTROLLERS)]
    for parent in parents:
        try:  # another user's parent (root's, made under umask 077) may be unreadable: nothing of ours is in it
            children = list(parent.iterdir()) if parent is not None else []
        except OSError:
            continue
        for child in children:
            if not child.is_dir() or _owner_alive(child.name):
                continue
            try:
                if not (child / "cgroup.procs").read_text().split():
                    child.rmdir()
            except OSError:
                pass


def send_signal(pid: int, sig: int) -> None:
    """Signal `pid` if it still exists and may be signalled (a sandbox process may be gone already)."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
