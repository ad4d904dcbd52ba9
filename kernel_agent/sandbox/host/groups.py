"""The cgroups one sandbox joins before exec, and what they report: its own v2 cgroup (membership, exact
CPU, the v2 freezer), a v1 cpuset on the timing cores, a pids group (the peak task count), a memory group
held to the evaluation's booking, and a v1 freezer where v2 has none. Each is optional: where the machine
has no writable hierarchy for one, the rule it serves falls back (DESIGN.md section 6)."""

from __future__ import annotations

import os
from pathlib import Path

from kernel_agent.sandbox.host.cgroups import Cgroup, V1Group, cgroup_root, clean_stale_cgroups
from kernel_agent.sandbox.host.control import Freezer, SignalFreezer, V1Freezer, v2_freezer


class SandboxGroups:
    def __init__(self, label: str, cpus: set[int] | None, memory_bytes: int) -> None:
        clean_stale_cgroups()
        root = cgroup_root()
        self.cgroup = _own_cgroup(root, label)
        self.cpus = cpus
        # The timing cores as a cpuset the sandbox cannot leave (sched_setaffinity alone can be undone
        # from inside), and a pids group whose peak shows threads that lived only inside a call.
        self.cpuset = V1Group.make("cpuset", label) if cpus else None
        if self.cpuset is not None:
            try:
                self.cpuset.write("cpuset.cpus", ",".join(str(c) for c in sorted(cpus or ())))
            except OSError:  # cores the hierarchy does not offer: affinity alone holds them
                self.cpuset.remove()
                self.cpuset = None
        self.pids = V1Group.make("pids", label)
        # The cgroup freezer where there is one: v2's on the sandbox's own cgroup, else a v1 freezer group
        # (KERNEL_AGENT_FREEZER=signal forces the SIGSTOP fallback, for its tests).
        signal_only = os.environ.get("KERNEL_AGENT_FREEZER") == "signal"
        self.v2_freezer = None if signal_only else v2_freezer(self.cgroup)
        self.freezer_group = V1Group.make("freezer", label) if self.v2_freezer is None and not signal_only else None
        self.memory_bytes = memory_bytes
        self.memory_group = V1Group.make("memory", label) if memory_bytes else None
        if self.memory_group is not None:
            try:  # shared-memory pages the sandbox faults in are charged here too (its input segment's holes)
                self.memory_group.write("memory.limit_in_bytes", str(memory_bytes))
            except OSError:
                self.memory_group.remove()
                self.memory_group = None

    def joined(self) -> list[Cgroup | V1Group]:
        """The groups the child joins between fork and exec."""
        return [g for g in (self.cgroup, self.cpuset, self.pids, self.memory_group, self.freezer_group) if g]

    def freezer(self) -> Freezer:
        return self.v2_freezer or (V1Freezer(self.freezer_group) if self.freezer_group else SignalFreezer())

    def cores(self) -> str:
        """How the sandbox is held to its cores, for its accounting."""
        if self.cpuset is not None:
            return "cpuset " + self.cpuset.read("cpuset.cpus")
        return "affinity" if self.cpus else "any"

    def peak_tasks(self) -> int | None:
        """The most threads and processes the sandbox ever ran at once (pids.peak), where the machine records it."""
        if self.pids is None:
            return None
        try:
            return int(self.pids.read("pids.peak"))
        except (OSError, ValueError):
            return None

    def over_booking(self) -> str:
        """'over its memory booking: 2.6 GB' when the sandbox's memory cgroup hit its limit, else ''."""
        group = self.memory_group
        if group is None:
            return ""
        try:
            hit = int(group.read("memory.failcnt")) > 0
        except (OSError, ValueError):
            return ""
        return f"over its memory booking: {self.memory_bytes / (1 << 30):.1f} GB" if hit else ""

    def remove(self) -> None:
        """Kill whatever is left in them and delete them."""
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
        for group in (self.cpuset, self.pids, self.memory_group, self.freezer_group):
            if group is not None:
                group.remove()
        self.cpuset = self.pids = self.memory_group = self.freezer_group = None


def _own_cgroup(root: Path | None, label: str) -> Cgroup | None:
    """The sandbox's own v2 cgroup, or None where it cannot be made now (then /proc accounts for it)."""
    if root is None:
        return None
    try:
        return Cgroup(root, label)
    except OSError:
        return None


def timing_cpus(threads: int) -> set[int] | None:
    """The same cores for every worker timed with `threads` threads: the last ones, away from
    the orchestrator. Two vCPUs of one VM can differ by a few percent for minutes; a baseline
    and a candidate pinned to the same cores cannot end up on different ones."""
    try:
        available = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if threads >= len(available):
        return None
    return set(available[-threads:])
