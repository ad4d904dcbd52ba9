"""The A/B timing protocol between a baseline worker and a candidate worker.

- Baseline and candidate live in separate sandboxed processes; the baseline's process never
  imported candidate code, and both were started with byte-identical file names and a heap
  pre-faulted alike (per-process speed differences otherwise reached 5-20% here).
- Both are frozen (SIGSTOP) except while serving one request. A request's inputs are drawn
  here and written into the sealed input segment while the sandbox is frozen, so they exist
  nowhere the candidate can read before its request.
- Requests are interleaved one at a time between the two sides, the side that goes first
  swapping every request, so drift, load and order effects fall on both alike. A request
  is one call, or several for a kernel much shorter than a request's own overhead.
- The time of record of each call is the worker's claim, scaled up (never down) until a
  request's claims add up to this process's clock around it less the baseline's median
  overhead (the baseline is trusted code). Both sides go through the same rule; a lie
  cannot lower the record, and a gross one is rejected by name. On a GPU the claims are
  CUDA events, bounded the same way by the host clock.
- Every call gets an input set drawn for it (the same sets for both sides while a round's
  sets fit in memory), so caching cannot win.
- A random subset of each candidate block's calls, chosen here in secret, is audited:
  outputs are read out of the frozen process right after the request and compared with
  the reference once the block is over.
- CPU time of every thread of the sandbox is accounted for from outside: a candidate using
  more cores than its thread budget, or more tasks than the baseline plus that budget, is
  rejected with the numbers (where a cgroup cpuset exists it cannot use them at all).
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from kernel_agent.core.timing_result import TimingResult
from kernel_agent.core.verdict import Refusal, RefusalKind, Status
from kernel_agent.measure.contention import Contention, CoreTimes, contention, core_times
from kernel_agent.sandbox.host.groups import timing_cpus
from kernel_agent.timing.job import TimingFailure, TimingJob
from kernel_agent.timing.rounds import PairRun
from kernel_agent.timing.stopping import Ending, stop_after
from kernel_agent.timing.summary import summarize

__all__ = ["TimingFailure", "TimingJob", "measure_speedup"]

CORES = os.cpu_count() or 1
_THREADS_LOCK = threading.Lock()
_THREADS_STATE = {"holders": 0, "saved": 0}


@contextmanager
def _single_threaded() -> Iterator[None]:
    """Run this thread single-threaded, then restore the count the first overlapping timing saw.

    torch's thread count is part per-thread (OpenMP) and part process-wide (new threads start from
    it); a plain save/restore in two overlapping timings (different devices) would let the second
    save the first's 1 and leave it behind for every thread started later."""
    with _THREADS_LOCK:
        if _THREADS_STATE["holders"] == 0:
            _THREADS_STATE["saved"] = torch.get_num_threads()
        _THREADS_STATE["holders"] += 1
        saved = _THREADS_STATE["saved"]
    torch.set_num_threads(1)
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_STATE["holders"] -= 1
        torch.set_num_threads(saved)


def _sandboxes_cpu(jobs: list[TimingJob]) -> int:
    """Every pair's sandboxes' CPU so far (ns), read while they are frozen."""
    return sum(side.cpu_ns() for job in jobs for side in (job.baseline, job.candidate))


def _contention(
    job: TimingJob, jobs: list[TimingJob], watched: tuple[int, CoreTimes], cores: set[int] | None
) -> Contention | None:
    """On the CPU, others on the timing cores make any number noise: the timing is refused, with the share.
    Every pair's sandboxes are ours. On the device path, another process on the GPU does the same (DESIGN.md
    section 18)."""
    if job.device != "cpu":
        exchange = getattr(job.candidate, "exchange", None)  # a DeviceWorkerSession's
        if exchange is not None:
            members = {m for j in jobs for side in (j.candidate, j.baseline) for m in side.members()}
            busy_device = exchange.busy({os.getpid(), *members})
            if busy_device:
                raise TimingFailure(Status.CORRECT, busy_device, Refusal(RefusalKind.BUSY))
        return None
    busy = contention(watched[1], core_times(cores), _sandboxes_cpu(jobs) - watched[0], len(cores or ()) or CORES)
    refused = busy.refusal()
    if refused:
        raise TimingFailure(
            Status.CORRECT, refused, Refusal(RefusalKind.BUSY, share=round(max(busy.other, busy.stolen), 4))
        )
    return busy


def _measure(job: TimingJob, more: list[TimingJob], clock: Callable[[], float]) -> tuple[TimingResult, list[str]]:
    """One pair (`job`) or several (`more` besides): every pair warmed up and staged first, then rounds taken
    pair after pair, the order rotating each cycle, until the stopping rule ends it (`stop_after`)."""
    rng = secrets.SystemRandom()
    jobs = [job, *more]
    runs = [PairRun(j, rng) for j in jobs]
    cores = timing_cpus(job.threads) if job.device == "cpu" else None
    watched = _sandboxes_cpu(jobs), core_times(cores)
    began = clock()
    ended = Ending("rounds", None)
    for cycle in range(job.rounds):
        for offset in range(len(runs)):
            runs[(cycle + offset) % len(runs)].one_round()
        seen = stop_after(job, [run.records() for run in runs], cycle + 1, clock() - began)
        if seen is not None:
            ended = seen
            break
    busy = _contention(job, jobs, watched, cores)
    return summarize(job, runs, ended, busy)


# ******************** the entry point ********************


def measure_speedup(
    job: TimingJob, more: list[TimingJob] | None = None, clock: Callable[[], float] = time.monotonic
) -> tuple[TimingResult, list[str]]:
    """The A/B timing of `job`'s pair of processes, and of `more` pairs (the same job on other processes)."""
    # This process stays single-threaded while blocks are timed: idle OpenMP threads spin after
    # each parallel region and would steal cores from whichever side is timed next.
    with _single_threaded():
        return _measure(job, list(more or []), clock)
