"""The anti-tamper rules of the A/B timing: the time of record of each call, the timer-mismatch rule, the work
budget of the candidate's sandbox, and (on a GPU) the host clock against the device events.

The record of a call is the worker's claim, never less than this process's clock minus what it adds for the
trusted baseline (IPC, the wake-up after a thaw, bookkeeping): a lie is worth at most the baseline's overhead
jitter, and a candidate whose own clock misses far more than the baseline's, in most of its calls, is rejected by
name.
"""

from __future__ import annotations

import numpy as np

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.host.session import Timed
from kernel_agent.timing.cpu_use import after_reply_cap, cpu_use
from kernel_agent.timing.job import Samples, TimingFailure, TimingJob

CLAIM_SLACK_MS = 0.05  # a worker may not claim more time than this process's clock saw (clock granularity only)
# A candidate whose clock misses more than the baseline's by all of these, in most requests, is named:
TAMPER_FRACTION = 0.35  # ...of its median claim
TAMPER_SPREAD = 2.0  # ...and of the baseline's interquartile spread of that overhead
TAMPER_MIN_MS = 0.02
CORE_SLACK = 1.1  # CPU of the timed calls may exceed threads x their wall time by this factor...
CORE_MIN_MS = {"cgroup cpu.stat": 5.0, "/proc schedstat": 40.0}  # ...plus this (the accounting's granularity)
THREAD_SLACK = 4  # tasks the candidate may run at once beyond the baseline's peak plus its thread budget
PING_QUANTILE = 0.1  # the baseline's pings, taken at their low end: a candidate's own request cannot cost less


def claims(timed: Timed, device: str) -> list[float]:
    """What the worker says each call of a request took: CUDA events on a GPU, its host clock on a CPU."""
    return timed.device_ms if device == "cuda" and timed.device_ms is not None else timed.host_ms


def _gaps(requests: list[Timed], device: str) -> np.ndarray:
    """What this process's clock saw beyond the worker's own claims, per request."""
    return np.asarray([t.trusted_ms - sum(claims(t, device)) for t in requests])


def overhead_bound(samples: Samples, config: int, device: str) -> float:
    """The median of what this process's clock adds to the trusted baseline's own claims per request
    (IPC, the wake-up after a thaw, the worker's bookkeeping)."""
    return float(np.median(_gaps(samples.flat(config), device)))


def record_floor(samples: Samples, config: int, device: str) -> float:
    """What the time of record may take off this process's clock around a request (ms). On a CPU: the low
    end (PING_QUANTILE) of the trusted baseline's pings, the least a request costs with no kernel and no
    bookkeeping in it, which no worker can go under: so a leaner worker than the honest one buys nothing
    (its bookkeeping is outside the timed request anyway). On a GPU, whose claims are device events: the
    baseline's median overhead, until the device path times on the trusted side."""
    if device == "cuda" or not samples.pings or not samples.pings[config]:
        return overhead_bound(samples, config, device)
    return float(np.quantile(samples.pings[config], PING_QUANTILE))


def records_ms(timed: Timed, bound_ms: float, device: str) -> list[float]:
    """The time of record of each call of a request: the request's time, shared equally among its
    calls. That time is the worker's claims added up, raised (never lowered) to this process's clock
    less the floor (`record_floor`). Both sides go through the same rule, so honest jitter
    weighs alike on each; claims below what our clock saw cannot lower the record, and how the
    worker splits its claims among the calls of one request changes nothing (an uneven split could
    otherwise pull the median of the calls below their mean)."""
    claimed = claims(timed, device)
    if not claimed:
        return []
    total = max(sum(claimed), timed.trusted_ms - bound_ms)
    return [max(total / len(claimed), 1e-4)] * len(claimed)


# ******************** the rules ********************


def timer_mismatch(candidate: list[Timed], baseline: list[Timed], device: str) -> str | None:
    """A reason when the candidate's own clock misses far more of its requests than the baseline's does.

    Pooled over all requests: the candidate's gaps must sit above the baseline's almost everywhere
    (its lower quartile above their upper quartile) and the median excess must clear both a share
    of its claims and twice the baseline's spread. A lie in some requests only is not named, and
    buys nothing: the record is bounded by our clock in every request."""
    cand, base = _gaps(candidate, device), _gaps(baseline, device)
    if not len(cand) or not len(base):
        return None
    claimed = float(np.median([sum(claims(t, device)) for t in candidate]))
    excess = float(np.median(cand) - np.median(base))
    q25, q75 = np.quantile(base, [0.25, 0.75])
    threshold = max(TAMPER_MIN_MS, TAMPER_FRACTION * claimed, TAMPER_SPREAD * float(q75 - q25))
    if excess > threshold and float(np.quantile(cand, 0.25)) > float(q75):
        return (
            f"timer mismatch: the candidate's own clock claims {claimed:.3f} ms per request but "
            f"the orchestrator's clock sees {excess:.3f} ms more per request than it sees for "
            "the baseline, in most of them: a forged or bypassed timer, or work hidden from it"
        )
    return None


def work_rules(job: TimingJob, samples: dict[str, Samples]) -> str | None:
    """Reject a candidate whose sandbox did more work, or ran more tasks, than its budget allows (for a trusted
    reference, return the reason instead: work outside its calls never shortens its time of record, so a
    speedup against it is only understated).

    CPU is judged against the wall time from thaw to reply and on past it up to twice the baseline's median
    stretch to the freeze (not to the freeze itself: a thread stuck in the kernel could delay that), with the
    accounting's own granularity as the only slack; on each shape alone,
    over the requests at or below its median wall time (`cpu_use`): the requests the speed is made of, so idle
    requests that the median leaves out cannot dilute it either."""
    reason = None
    slack_ms = CORE_MIN_MS.get(job.candidate.accounting.method, 40.0)
    for c, (shape, dtype) in enumerate(job.configs):
        used = cpu_use(samples["candidate"].flat(c), after_reply_cap(samples["baseline"].flat(c)))
        cpu_ms, wall_ms = used.cpu_ns / 1e6, used.wall_ns / 1e6
        if cpu_ms > wall_ms * job.threads * CORE_SLACK + slack_ms:
            reason = (
                f"the candidate's sandbox used {cpu_ms:.0f} ms of CPU during {wall_ms:.0f} ms of timed calls "
                f"(its {used.requests} requests at or below the median time, shape {list(shape)} {dtype}): "
                f"more than its {job.threads} thread(s) allow"
            )
            break
    cand, base = job.candidate.peak_tasks(), job.baseline.peak_tasks()
    what = "at once (peak)"
    if cand is None or base is None:
        cand, base, what = job.candidate.accounting.max_threads, job.baseline.accounting.max_threads, "while frozen"
    if reason is None and cand > base + job.threads + THREAD_SLACK:
        reason = (
            f"the candidate's sandbox ran {cand} threads {what} where "
            f"the baseline's ran {base} (thread budget {job.threads})"
        )
    if reason is not None and job.enforce_work_budget:
        raise TimingFailure(Status.REJECTED, reason)
    return reason


Records = dict[str, list[list[list[float]]]]  # each side's times of record: config -> round -> calls


def times_of_record(job: TimingJob, samples: dict[str, Samples]) -> tuple[Records, list[float]]:
    """Each side's times of record (config -> round -> calls) and the baseline overhead bound of each config."""
    per_side: Records = {"baseline": [], "candidate": []}
    bounds = []
    for c in range(len(job.configs)):
        bound = record_floor(samples["baseline"], c, job.device)
        bounds.append(bound)
        for role in per_side:
            per_side[role].append(
                [[r for t in block for r in records_ms(t, bound, job.device)] for block in samples[role].calls[c]]
            )
    return per_side, bounds


def cross_check(samples: dict[str, Samples], configs: int) -> list[str]:
    """On a GPU: the worker's host clock around each call against its device events, with the
    baseline's gap as the norm."""

    def gaps(role: str) -> tuple[list[float], list[float]]:
        host_gap, device = [], []
        for c in range(configs):
            for t in samples[role].flat(c):
                for h, d in zip(t.host_ms, t.device_ms or [0.0] * len(t.host_ms)):
                    host_gap.append(h - d)
                    device.append(d)
        return host_gap, device

    cand_gap, cand_device = gaps("candidate")
    base_gap, _ = gaps("baseline")
    extra, cand_ms = float(np.median(cand_gap)) - float(np.median(base_gap)), float(np.median(cand_device))
    if extra > max(0.1 * cand_ms, 0.05):
        return [
            f"host clock exceeds device events by {extra:.3f} ms per call "
            "more than the baseline's (side-stream or background work?)"
        ]
    return []
