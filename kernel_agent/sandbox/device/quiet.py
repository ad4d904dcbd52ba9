"""Is the device quiet? (DESIGN.md section 18.) After each reply, with the worker frozen, the orchestrator's probe
(one tiny kernel on its own stream) must run about as fast as it does when nothing is queued: another context's
kernel (a side stream or a graph still running, a persistent poller) delays it by a time slice. Its idle
latency is learned with both workers frozen; the same probe with both frozen during timing sees a second
process loading the device. NVML's compute processes, where present, name a second process outright."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from enum import Enum

BUSY_FACTOR = 10.0  # a probe this many times its idle median is another context's work (a slice is ~1 ms)
BUSY_MIN_MS = 0.2  # and at least this: an idle probe's launch jitter stays far under it
MIN_IDLE_PROBES = 3


class Quiet(Enum):
    IDLE = "idle"
    BUSY = "busy"
    UNKNOWN = "unknown"  # too few idle probes to judge yet


@dataclass
class ProbeBaseline:
    """The probe's latency with nothing queued (both workers frozen), learned as the timing goes."""

    idle_ms: list[float] = field(default_factory=list)

    def add(self, probe_ms: float) -> None:
        self.idle_ms.append(probe_ms)

    def bound_ms(self) -> float | None:
        if len(self.idle_ms) < MIN_IDLE_PROBES:
            return None
        return max(BUSY_FACTOR * statistics.median(self.idle_ms), BUSY_MIN_MS)

    def judge(self, probe_ms: float) -> Quiet:
        bound = self.bound_ms()
        if bound is None:
            return Quiet.UNKNOWN
        return Quiet.BUSY if probe_ms > bound else Quiet.IDLE


@dataclass(frozen=True)
class AfterReply:
    """What was seen after one reply, the worker frozen: the probe. (NVML's per-process samples are not used:
    their period, about 1/6 s, straddles the reply, so they cannot tell work after it from work before.)"""

    probe_ms: float


def work_past_reply(seen: AfterReply, baseline: ProbeBaseline) -> str | None:
    """The rejection's reason when the worker's work still ran after its reply, or None."""
    if baseline.judge(seen.probe_ms) is Quiet.BUSY:
        return (
            f"work still running on the device after the reply (the orchestrator's probe took {seen.probe_ms:.3f} ms "
            f"with the worker frozen, over the {baseline.bound_ms():.3f} ms bound)"
        )
    return None


def foreign_load(
    on_device: list[int], ours: set[int], frozen_probes: list[float], baseline: ProbeBaseline
) -> str | None:
    """Why the device was busy with another process during timing (a verdict measured so is noise), or None.
    `on_device`: NVML's compute processes (empty without NVML); `frozen_probes`: probes taken with both workers
    frozen after the idle baseline was learned. NVML names host pids: where none of ours is among them (a
    container's own pid namespace), its pids say nothing here and only the probes judge."""
    others = sorted(set(on_device) - ours) if set(on_device) & ours else []
    if others:
        return f"the device was busy with another process (pid {', '.join(map(str, others[:5]))})"
    busy = [p for p in frozen_probes if baseline.judge(p) is Quiet.BUSY]
    if len(busy) > max(1, len(frozen_probes) // 10):  # one slow probe is jitter; a tenth is a load
        return f"the device was busy with another process ({len(busy)} of {len(frozen_probes)} idle probes delayed)"
    return None
