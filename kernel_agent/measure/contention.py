"""How much of the timing cores went to other processes while a verdict was timed (read from outside).

Two honest copies of one kernel read 0.28x to 24x while another process was busy on the cores: a number
measured like that is noise, not a speedup. `/proc/stat` gives each core's busy and stolen time; what the
two sandboxes and this process used in the same span is known; the rest of the cores' busy time went to
someone else. Past CONTENTION_LIMIT of the cores' time (or as much stolen by the hypervisor) the verdict
refuses to report a speedup and says why.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

# Of the timing cores' time, to other processes or stolen; KERNEL_AGENT_CONTENTION_LIMIT=1 times anyway
# (for a development machine shared on purpose: the numbers are then what the load makes them).
CONTENTION_LIMIT = float(os.environ.get("KERNEL_AGENT_CONTENTION_LIMIT", "0.25"))
TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CoreTimes:
    """Busy and stolen time of some cores (ns, from /proc/stat), this process's CPU, and when."""

    busy_ns: int
    steal_ns: int
    own_ns: int
    at_ns: int


def core_times(cores: set[int] | None) -> CoreTimes:
    """A snapshot for `cores` (None: every core)."""
    busy = steal = 0
    with open("/proc/stat") as stat:
        for line in stat:
            if not line.startswith("cpu") or line.startswith("cpu "):
                continue
            name, *fields = line.split()
            if cores is not None and int(name[3:]) not in cores:
                continue
            user, nice, system, _idle, _iowait, irq, softirq, stolen = (int(v) for v in fields[:8])
            busy += user + nice + system + irq + softirq
            steal += stolen
    usage = resource.getrusage(resource.RUSAGE_SELF)
    own = int((usage.ru_utime + usage.ru_stime) * 1e9)
    return CoreTimes(busy * TICK_NS, steal * TICK_NS, own, time.monotonic_ns())


@dataclass(frozen=True)
class Contention:
    """Shares of the timing cores' time, over a timed span, that went to other processes or were stolen."""

    other: float
    stolen: float
    cores: int
    seconds: float

    def refusal(self) -> str | None:
        """The reason no speedup can be reported, or None."""
        if self.other > CONTENTION_LIMIT:
            return (
                f"the machine was too busy to measure: {self.other:.0%} of the timing cores' time went to other "
                f"processes over {self.seconds:.1f} s of timing (at most {CONTENTION_LIMIT:.0%}); rerun when quieter"
            )
        if self.stolen > CONTENTION_LIMIT:
            return (
                f"the machine was too busy to measure: the hypervisor took {self.stolen:.0%} of the timing cores' "
                f"time over {self.seconds:.1f} s of timing (at most {CONTENTION_LIMIT:.0%})"
            )
        return None

    def to_json(self) -> dict[str, float]:
        return {"other": round(self.other, 4), "stolen": round(self.stolen, 4), "cores": self.cores}


def contention(before: CoreTimes, after: CoreTimes, sandboxes_ns: int, cores: int) -> Contention:
    """What of the cores' busy time between two snapshots was neither the sandboxes' nor this process's."""
    span = max(1, after.at_ns - before.at_ns) * max(1, cores)
    ours = sandboxes_ns + (after.own_ns - before.own_ns)
    other = max(0, (after.busy_ns - before.busy_ns) - ours)
    return Contention(
        other / span, (after.steal_ns - before.steal_ns) / span, cores, (after.at_ns - before.at_ns) / 1e9
    )
