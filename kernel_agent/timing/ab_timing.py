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

import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kernel_agent.core.comparison import Comparison
from kernel_agent.core.timing_result import Resolution, ShapeTiming, Summary, TimingResult, geometric_mean
from kernel_agent.core.verdict import Refusal, RefusalKind, Status, StatusError
from kernel_agent.measure.contention import Contention, CoreTimes, contention, core_times
from kernel_agent.problem.footprint import POOL_BYTES  # beyond it, each timed call draws its own inputs
from kernel_agent.problem.oracle import CaseMaker, fresh_seed
from kernel_agent.sandbox.host.groups import timing_cpus
from kernel_agent.sandbox.host.session import Timed, WorkerFailure, WorkerSession
from kernel_agent.sandbox.host.shm import ExpectedOutput, aligned_bytes
from kernel_agent.sandbox.protocol import Warmup
from kernel_agent.timing import processes
from kernel_agent.timing.processes import PairRecords, mde
from kernel_agent.timing.sequential import LOOK_LEVEL, MIN_ROUNDS, Look, Settled, look
from kernel_agent.timing.speed_class import SpeedClass, classify
from kernel_agent.timing.stats import (
    PROCESS_EFFECT,
    calls_per_block,
    percentile,
    point_speedup,
    speedup_interval,
)

CLAIM_SLACK_MS = 0.05  # a worker may not claim more time than this process's clock saw (clock granularity only)
# The record of a call is the worker's claim, never less than this process's clock minus the median of
# what it adds for the trusted baseline (IPC, the wake-up after a thaw, bookkeeping): a lie is worth
# at most the baseline's overhead jitter, and a candidate whose own clock misses far more than the
# baseline's, in most of its calls, is rejected by name.
TAMPER_FRACTION = 0.35  # ...of its median claim
TAMPER_SPREAD = 2.0  # ...and of the baseline's interquartile spread of that overhead
TAMPER_MIN_MS = 0.02
CORE_SLACK = 1.1  # CPU of the timed calls may exceed threads x their wall time by this factor...
CORE_MIN_MS = {"cgroup cpu.stat": 5.0, "/proc schedstat": 40.0}  # ...plus this (the accounting's granularity)
THREAD_SLACK = 4  # tasks the candidate may run at once beyond the baseline's peak plus its thread budget
REQUEST_MS = 2.0  # a request's kernel time should reach this (several calls per request for shorter kernels)...
MAX_CALLS_PER_REQUEST = 64  # ...up to this many calls
MAX_AUDITS_PER_BLOCK = 10
# Warm-up per side and config: this many calls and this long at the least. The checks have already run the
# kernel on every check case (and the baseline replayed them), so compilation is done; three calls warm the
# caches for the benchmark shape. Ten calls cost a 12 ms kernel 0.5 s of a 2 s timing phase (cpp_softmax, two
# shapes), and a 1 s KernelBench convolution 10 s per side.
CORES = os.cpu_count() or 1
PINGS_PER_BLOCK = 2  # the baseline's pings before each block of each config: the floor under the records
PING_QUANTILE = 0.1  # ...taken at their low end: a candidate's own request cannot cost less
WARMUP_CALLS = 3
MIN_PAIR_ROUNDS = 2  # several pairs: rounds of each before the first look (the audit then samples 2 x pairs blocks)
WARMUP_SECONDS = 0.03


class TimingFailure(StatusError):
    """The A/B timing ended with a verdict (a failing side, tampering, a wrong audited output)."""


Config = tuple[tuple[int, ...], str]  # (shape, dtype)


@dataclass
class TimingJob:
    """What one A/B timing needs from the evaluation (it never reaches into the evaluation itself)."""

    configs: list[Config]
    maker: CaseMaker
    candidate: WorkerSession
    baseline: WorkerSession
    device: str
    threads: int
    rounds: int
    target_block_ms: float
    audit_fraction: float
    judge: Callable[[list[torch.Tensor], list[torch.Tensor], str], Comparison]  # (inputs, outputs, dtype): as a check
    expected: dict[Config, tuple[ExpectedOutput, ...]]  # each config's outputs: descriptions are held to them
    min_gain: float = 0.02
    sequential: bool = False  # stop once a look settles the decision (timing/sequential.py); `rounds` is the most
    min_rounds: int = MIN_ROUNDS
    enforce_work_budget: bool = True  # False for trusted references: their excess work is recorded, not refused
    draw_on: str = "cpu"  # where timed inputs are drawn: "cuda" on the device data path (DESIGN.md section 18)
    resolution: float = 0.03  # several pairs: stop once the 95% interval is this narrow (half of it each side)
    budget_s: float = 8.0  # several pairs: stop once timing has taken this long (seconds)


@dataclass
class Samples:
    """Every timed call of one side: config -> round -> calls; and the baseline's pings, per config."""

    calls: list[list[list[Timed]]] = field(default_factory=list)
    pings: list[list[float]] = field(default_factory=list)

    def flat(self, config: int) -> list[Timed]:
        return [t for block in self.calls[config] for t in block]


def measure_speedup(
    job: TimingJob, more: list[TimingJob] | None = None, clock: Callable[[], float] = time.monotonic
) -> tuple[TimingResult, list[str]]:
    """The A/B timing of `job`'s pair of processes, and of `more` pairs (the same job on other processes)."""
    # This process stays single-threaded while blocks are timed: idle OpenMP threads spin after
    # each parallel region and would steal cores from whichever side is timed next.
    with _single_threaded():
        return _measure(job, list(more or []), clock)


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


@contextmanager
def _failures_of(role: str) -> Iterator[None]:
    """A worker failure during timing, worded for the side it came from."""
    try:
        yield
    except WorkerFailure as exc:
        status = exc.status if role == "candidate" else Status.RUNTIME_ERROR
        prefix = "during timing" if role == "candidate" else "the baseline failed during timing"
        raise TimingFailure(status, f"{prefix}: {exc.reason}") from None


@dataclass(frozen=True)
class Shape:
    """How one config's timed calls are grouped: `calls` kernel calls per request, `requests` per block."""

    calls: int
    requests: int

    @property
    def per_block(self) -> int:
        return self.calls * self.requests


def request_shape(per_call_ms: float, target_block_ms: float, max_calls: int = MAX_CALLS_PER_REQUEST) -> Shape:
    """Several calls per request only for kernels much shorter than a request's own overhead
    (about 0.5 ms here): the orchestrator's clock around a request must be dominated by the kernel
    for it to bound the claims (a 0.05 ms kernel under 0.5 ms of jitter-prone overhead could claim
    anything). Never more calls than `max_calls` (what the sized input segment holds)."""
    most = max(1, min(MAX_CALLS_PER_REQUEST, max_calls))
    calls = 1 if per_call_ms <= 0 else max(1, min(most, math.ceil(REQUEST_MS / per_call_ms)))
    return Shape(calls, calls_per_block(per_call_ms * calls, target_block_ms))


def _warm_up(job: TimingJob) -> list[Shape]:
    """Compilation and caches out of the numbers; the baseline's speed shapes the blocks."""
    shapes = []
    for shape, dtype in job.configs:
        inputs = job.maker.inputs(shape, dtype, "normal", fresh_seed())
        per_call_ms = 0.0
        for role, side in (("baseline", job.baseline), ("candidate", job.candidate)):
            request = Warmup(WARMUP_CALLS, WARMUP_SECONDS, side.time_left() / 4, side.place(inputs))
            with _failures_of(role):
                reply = side.request(request, "warmup")
            if role == "baseline":
                per_call_ms = 1000 * float(reply.get("seconds", 0)) / max(1, int(reply.get("calls", 1)))
        fits = job.candidate.segment_capacity() // max(1, aligned_bytes(inputs))
        shapes.append(request_shape(per_call_ms, job.target_block_ms / len(job.configs), fits))
    return shapes


class InputPlan:
    """Fresh inputs for every timed call, within a memory bound.

    While a round's sets fit in POOL_BYTES, both sides get the same sets (each process sees each
    set once). Beyond it, every call of each side gets a set drawn for it alone. Nothing is ever
    reused or derived from an earlier input: a kernel that kept an earlier output cannot answer."""

    def __init__(self, job: TimingJob, config: Config, shape: Shape, rng: secrets.SystemRandom) -> None:
        self.job, self.config, self.shape, self.rng = job, config, shape, rng
        self.first: list[torch.Tensor] | None = self.draw()
        self.set_bytes = sum(t.numel() * t.element_size() for t in self.first)
        self.shared = self.set_bytes * shape.per_block <= POOL_BYTES

    def draw(self) -> list[torch.Tensor]:
        shape, dtype = self.config
        return self.job.maker.inputs(shape, dtype, "normal", fresh_seed(), self.job.draw_on)

    def round(self) -> list[list[torch.Tensor]] | None:
        """The round's sets for both sides, or None when each call draws its own."""
        if not self.shared:
            return None
        first, self.first = self.first, None
        return [first if (i == 0 and first is not None) else self.draw() for i in range(self.shape.per_block)]

    def audit_picks(self, rounds: int) -> set[tuple[int, int]]:
        """(round, call) pairs of the candidate's to audit: a fraction of every block, chosen now and kept here."""
        per_block = self.shape.per_block
        count = min(MAX_AUDITS_PER_BLOCK, max(1, round(self.job.audit_fraction * per_block)))
        return {(r, i) for r in range(rounds) for i in self.rng.sample(range(per_block), count)}


class PairRun:
    """One baseline process against one candidate process: warmed up and staged at construction, then timed a
    round at a time (`one_round`), so that several pairs can take turns round by round (issue 36)."""

    def __init__(self, job: TimingJob, rng: secrets.SystemRandom) -> None:
        self.job = job
        self.shapes = _warm_up(job)
        self.plans = [InputPlan(job, config, shape, rng) for config, shape in zip(job.configs, self.shapes)]
        for plan in self.plans:  # every layout staged on both sides before the first timed input is placed
            for role, side in (("baseline", job.baseline), ("candidate", job.candidate)):
                with _failures_of(role):
                    side.stage([plan.first or plan.draw()] * plan.shape.calls)
        self.picks = [plan.audit_picks(job.rounds) for plan in self.plans]
        self.samples = {
            "baseline": Samples([[] for _ in job.configs], [[] for _ in job.configs]),
            "candidate": Samples([[] for _ in job.configs]),
        }
        self.audited = 0
        self.done = 0

    def one_round(self) -> None:
        """Rounds of requests interleaved one by one: the baseline and the candidate take turns on the
        same input sets, the side that goes first swapping every request. Load, frequency and cache
        effects that drift over a block (the side timed second in a block of blocks ran about 5% faster
        here) then fall on both sides alike."""
        job, samples, round_index = self.job, self.samples, self.done
        round_sets = [plan.round() for plan in self.plans]
        for c, plan in enumerate(self.plans):
            with _failures_of("baseline"):  # the floor under every record: what the least request costs
                samples["baseline"].pings[c] += [job.baseline.ping() for _ in range(PINGS_PER_BLOCK)]
            blocks, fetched = _one_block(job, plan, round_index, round_sets[c], self.picks[c], self.audited)
            for role, block in blocks.items():
                samples[role].calls[c].append(block)
            _check_audits(job, fetched, job.configs[c][1], self.audited)
            self.audited += len(fetched)
        self.done += 1

    def records(self) -> PairRecords:
        per_side, _ = _records(self.job, self.samples)
        return PairRecords(per_side["baseline"], per_side["candidate"])

    @property
    def inputs(self) -> list[str]:
        return [
            "drawn per round, the same for both sides" if plan.shared else "drawn per call, for each side"
            for plan in self.plans
        ]


def _measure(job: TimingJob, more: list[TimingJob], clock: Callable[[], float]) -> tuple[TimingResult, list[str]]:
    """One pair (`job`) or several (`more` besides): every pair warmed up and staged first, then rounds taken
    pair after pair, the order rotating each cycle, until the stopping rule ends it (`_look`)."""
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
        seen = _look(job, [run.records() for run in runs], cycle + 1, clock() - began)
        if seen is not None:
            ended = seen
            break
    busy = _contention(job, jobs, watched, cores)
    return _summarize(job, runs, ended, busy)


@dataclass(frozen=True)
class Ending:
    """What ended the timing: `settled` (an early look decided it), `same` (the interval fell inside
    +-resolution), `resolution` (the interval became narrower than the target), `budget` (the time per verdict
    was spent) or `rounds` (every pair timed its most rounds); and the early look's own record, if any."""

    by: str
    look: Look | None


Fetched = list[tuple[list[torch.Tensor], list[torch.Tensor]]]  # audited calls: their inputs and outputs read


def _one_block(
    job: TimingJob, plan: InputPlan, round_index: int, shared_sets: list | None, picks: set, audited: int
) -> tuple[dict[str, list[Timed]], Fetched]:
    """One block of requests for one config, sides alternating which goes first; the audited calls'
    outputs are read from the frozen candidate as they happen."""
    k, blocks, fetched = plan.shape.calls, {"baseline": [], "candidate": []}, []
    sides = {"baseline": job.baseline, "candidate": job.candidate}
    expected = job.expected[plan.config]
    for i in range(plan.shape.requests):
        order = ("baseline", "candidate") if (round_index + i) % 2 == 0 else ("candidate", "baseline")
        shared = shared_sets[i * k : (i + 1) * k] if shared_sets is not None else None
        for role in order:
            sets = shared if shared is not None else [plan.draw() for _ in range(k)]
            audits = [j for j in range(k) if role == "candidate" and (round_index, i * k + j) in picks]
            with _failures_of(role):
                timed = sides[role].timed_calls(
                    sets, integrity=i == plan.shape.requests - 1, watched={j: expected for j in audits}
                )
                for j in audits:
                    _audit_inputs(sides[role], timed, j, sets[j], audited + len(fetched) + 1)
                    fetched.append((sets[j], sides[role].read(timed.outputs[j], expected)))
            claimed = sum(claims(timed, job.device))
            if claimed > timed.trusted_ms + CLAIM_SLACK_MS:
                raise TimingFailure(
                    Status.REJECTED,
                    f"{role} claimed {claimed:.2f} ms for calls that took {timed.trusted_ms:.2f} ms (forged timer)",
                )
            blocks[role].append(timed)
    return blocks, fetched


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


def _audit_inputs(side: WorkerSession, timed: Timed, call: int, inputs: list[torch.Tensor], number: int) -> None:
    """An audited timed call's inputs, as the kernel left them, bitwise against what was placed (as in a check)."""
    changed = side.unchanged(timed.inputs[call], inputs)
    if changed:
        raise WorkerFailure(Status.INCORRECT, f"audited timed call {number} modified its input {changed[0]}")


def _sandboxes_cpu(jobs: list[TimingJob]) -> int:
    """Every pair's sandboxes' CPU so far (ns), read while they are frozen."""
    return sum(side.cpu_ns() for job in jobs for side in (job.baseline, job.candidate))


def _look(job: TimingJob, pairs: list[PairRecords], cycles: int, elapsed: float) -> Ending | None:
    """What ends the timing after cycle `cycles` (every pair timed that many rounds); None to go on. The last
    cycle is decided by the full 95% interval as with fixed rounds.

    One pair: the early looks of timing/sequential.py, as before issue 36. Several: a 99.9% look settles
    FAST or SLOW (the union bound of sequential.py holds for FAST); the 95% interval ends it as SAME, or when
    it is narrower than the target (half of it each side: `resolution` / 2); else the time budget does."""
    if not job.sequential or cycles >= job.rounds:
        return None
    if len(pairs) == 1:
        if cycles < job.min_rounds:
            return None
        base, cand = pairs[0].baseline, pairs[0].candidate
        early = look(point_speedup(base, cand), base, cand, job.min_gain)
        return Ending("settled", early) if early.settled else None
    if cycles < MIN_PAIR_ROUNDS:
        return None
    strict = processes.estimate(pairs, "99.9%")
    low, high = strict.ci
    if low > 1 + job.min_gain or high < 1 - job.min_gain:
        settled = Settled.FASTER if low > 1 + job.min_gain else Settled.NOT_FASTER
        early = Look(sum(p.rounds for p in pairs), strict.speedup, strict.ci, strict.ci, settled)
        return Ending("settled", early)
    final = processes.estimate(pairs)
    if classify(final.ci, job.min_gain, job.resolution) is SpeedClass.SAME:
        return Ending("same", None)
    if final.half_width <= job.resolution / 2:
        return Ending("resolution", None)
    if elapsed >= job.budget_s:
        return Ending("budget", None)
    return None


def _check_audits(job: TimingJob, fetched: list[tuple[list, list]], dtype: str, before: int) -> None:
    """Compare audited outputs with the reference, after the block (both sandboxes are frozen), by the same
    judge as the check calls: a timed call is held to exactly what a check call of its size is held to."""
    for number, (inputs, outputs) in enumerate(fetched):
        result = job.judge(inputs, outputs, dtype)
        if not result.passed:
            assert result.mismatch is not None
            raise TimingFailure(
                Status.INCORRECT,
                f"audited timed call {before + number + 1} returned a wrong result: {result.mismatch.line()}",
            )


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


def _work_rules(job: TimingJob, samples: dict[str, Samples]) -> str | None:
    """Reject a candidate whose sandbox did more work, or ran more tasks, than its budget allows (for a trusted
    reference, return the reason instead: work outside its calls never shortens its time of record, so a
    speedup against it is only understated).

    CPU is judged against the wall time from thaw to reply (not to the freeze: a thread stuck in
    the kernel could stretch that), with the accounting's own granularity as the only slack."""
    calls = [t for c in range(len(job.configs)) for t in samples["candidate"].flat(c)]
    cpu_ms = sum(t.cpu_ns for t in calls) / 1e6
    wall_ms = sum(t.wall_ns for t in calls) / 1e6
    allowed = wall_ms * job.threads * CORE_SLACK + CORE_MIN_MS.get(job.candidate.accounting.method, 40.0)
    reason = None
    if cpu_ms > allowed:
        reason = (
            f"the candidate's sandbox used {cpu_ms:.0f} ms of CPU during {wall_ms:.0f} ms of timed calls: "
            f"more than its {job.threads} thread(s) allow"
        )
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


def _records(job: TimingJob, samples: dict[str, Samples]) -> tuple[dict[str, list[list[list[float]]]], list[float]]:
    """Each side's times of record (config -> round -> calls) and the baseline overhead bound of each config."""
    per_side: dict[str, list[list[list[float]]]] = {"baseline": [], "candidate": []}
    bounds = []
    for c in range(len(job.configs)):
        bound = record_floor(samples["baseline"], c, job.device)
        bounds.append(bound)
        for role in per_side:
            per_side[role].append(
                [[r for t in block for r in records_ms(t, bound, job.device)] for block in samples[role].calls[c]]
            )
    return per_side, bounds


def _summarize(
    job: TimingJob, runs: list[PairRun], ended: Ending, busy: Contention | None = None
) -> tuple[TimingResult, list[str]]:
    over_budget = None
    flags: list[str] = []
    for run in runs:  # every candidate process is held to the rules against its own baseline
        over_budget = over_budget or _work_rules(run.job, run.samples)
        for c in range(len(job.configs)):
            reason = timer_mismatch(run.samples["candidate"].flat(c), run.samples["baseline"].flat(c), job.device)
            if reason:
                raise TimingFailure(Status.REJECTED, reason)
        if job.device == "cuda":
            flags += _cross_check(run.samples, len(job.configs))
    if job.device == "cuda":
        exchange = getattr(job.candidate, "exchange", None)  # the device path's: throttling is a flag
        flags += exchange.flags() if exchange is not None else []
    interval = _one_pair(runs[0], ended) if len(runs) == 1 else _over_pairs(runs, ended)
    first = runs[0]
    per_shape = interval.per_shape
    result = TimingResult(
        speedup=interval.speedup,
        speedup_ci=interval.ci,
        ci_level=interval.level,
        statistical_ci=interval.statistical_ci,
        process_effect=interval.process_effect,
        baseline=interval.baseline,
        candidate=interval.candidate,
        rounds=sum(run.done for run in runs),
        max_rounds=job.rounds * len(runs),
        stopping=_stopping(job, ended, len(runs)),
        calls_per_block=[shape.per_block for shape in first.shapes],
        calls_per_request=[shape.calls for shape in first.shapes],
        per_shape=[
            ShapeTiming(
                shape=tuple(shape),
                dtype=dtype,
                speedup=ps["speedup"],
                speedup_ci=tuple(ps["speedup_ci"]),
                baseline_median_ms=ps["baseline_median_ms"],
                candidate_median_ms=ps["candidate_median_ms"],
                baseline_p20_ms=ps["baseline_p20_ms"],
                candidate_p80_ms=ps["candidate_p80_ms"],
            )
            for (shape, dtype), ps in zip(job.configs, per_shape)
        ],
        audited_calls=sum(run.audited for run in runs),
        record_floor_ms=_records(job, first.samples)[1],
        timed_inputs=first.inputs,
        clock=("cuda events" if job.device == "cuda" else "worker perf_counter_ns")
        + ", bounded below by the orchestrator's clock per request less the floor of the baseline's pings",
        threads=job.threads,
        work_budget_exceeded=over_budget,
        contention=busy.to_json() if busy is not None else None,
        accounting={"baseline": job.baseline.accounting.to_json(), "candidate": job.candidate.accounting.to_json()},
        resolution=Resolution(
            target=job.resolution,
            half_width=interval.half_width,
            mde=mde(interval.se, interval.df, job.min_gain),
            ended_by=ended.by,
            budget_s=job.budget_s,
        ).to_json(),
        processes=interval.processes,
        cpu_per_wall=cpu_per_wall(runs),
    )
    return result, flags


@dataclass(frozen=True)
class Interval:
    """The speedup, its interval and the numbers each kind of timing (one pair, several) gives the record."""

    speedup: float
    ci: tuple[float, float]
    level: str
    statistical_ci: tuple[float, float]
    process_effect: float
    baseline: Summary
    candidate: Summary
    per_shape: list[dict[str, float]]
    se: float  # of the log speedup: the MDE's scale
    df: int
    processes: dict[str, Any] | None = None

    @property
    def half_width(self) -> float:
        low, high = self.ci
        return math.expm1(math.log(high / low) / 2) if low > 0 and math.isfinite(high) else math.inf


def _one_pair(run: PairRun, ended: Ending) -> Interval:
    """One pair: the round bootstrap widened by the fixed between-process term (large problems, or `processes`
    set to 1); an early stop is decided, and reported, by the stricter interval of its look."""
    pair = run.records()
    estimate = speedup_interval(pair.baseline, pair.candidate)
    stop = ended.look
    ci = tuple(stop.ci) if stop is not None else (estimate.ci_low, estimate.ci_high)
    # the normal-theory scale of the widened 95% interval (not of a look's 99.9%): what the MDE reads
    se = math.log(estimate.ci_high / estimate.ci_low) / (2 * 1.96) if estimate.ci_low > 0 else math.inf
    return Interval(
        speedup=estimate.speedup,
        ci=ci,  # type: ignore[arg-type]
        level=f"{LOOK_LEVEL:.1%} sequential" if stop is not None else "95%",
        statistical_ci=tuple(stop.statistical_ci if stop is not None else estimate.statistical_ci),  # type: ignore[arg-type]
        process_effect=PROCESS_EFFECT,
        baseline=estimate.baseline,
        candidate=estimate.candidate,
        per_shape=estimate.per_shape,
        se=se,
        df=120,
    )


def _over_pairs(runs: list[PairRun], ended: Ending) -> Interval:
    """Several pairs: the t interval over pairs (timing/processes.py), the process effect measured."""
    pairs = [run.records() for run in runs]
    est = processes.estimate(pairs)
    stop = ended.look
    ci = tuple(stop.ci) if stop is not None else est.ci
    t = processes.t_quantile(len(pairs) - 1, processes.LEVELS["95%"])  # per shape: over pairs
    every = [s for p in pairs for shape in p.baseline for r in shape for s in r]
    every_cand = [s for p in pairs for shape in p.candidate for r in shape for s in r]
    per_shape = []
    for s in range(len(pairs[0].baseline)):
        base = [np.median(np.concatenate(p.baseline[s])) for p in pairs]
        cand = [np.median(np.concatenate(p.candidate[s])) for p in pairs]
        logs = np.log(np.asarray(base) / np.asarray(cand))
        half = t * float(np.std(logs, ddof=1)) / math.sqrt(len(logs))
        per_shape.append(
            {
                "speedup": float(np.exp(logs.mean())),
                "baseline_median_ms": geometric_mean(base),
                "candidate_median_ms": geometric_mean(cand),
                "speedup_ci": [float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))],
                "baseline_p20_ms": percentile([r for p in pairs for r in p.baseline[s]], 20),
                "candidate_p80_ms": percentile([r for p in pairs for r in p.candidate[s]], 80),
            }
        )
    return Interval(
        speedup=est.speedup,
        ci=ci,  # type: ignore[arg-type]
        level=f"{LOOK_LEVEL:.1%} sequential over {len(pairs)} process pairs"
        if stop is not None
        else f"95% over {len(pairs)} process pairs",
        statistical_ci=est.rounds_only(),
        process_effect=est.process_effect,
        baseline=Summary.of(every),
        candidate=Summary.of(every_cand),
        per_shape=per_shape,
        se=est.se,
        df=est.df,
        processes={**est.to_json(), "memory": [_memory_of(run.job) for run in runs]},
    )


def _memory_of(job: TimingJob) -> dict[str, int | None]:
    """Each side's anonymous memory backed by huge pages (kB): a candidate cause of a process effect."""
    return {role: huge_pages_kb(side) for role, side in (("baseline", job.baseline), ("candidate", job.candidate))}


def huge_pages_kb(side: WorkerSession) -> int | None:
    """The worker process's AnonHugePages, from /proc (None where it cannot be read)."""
    control = getattr(side, "control", None)
    pid = getattr(control, "worker_pid", None)
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text() if pid else ""
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return None


def cpu_per_wall(runs: list[PairRun]) -> dict[str, float]:
    """Each side's sandbox CPU over its timed requests' wall time, over every pair: a candidate that buys its
    time with CPU beyond the baseline's (a hidden core) shows here (decision.py's guard on FAST)."""
    ratios = {}
    for role in ("baseline", "candidate"):
        timed = [t for run in runs for c in range(len(run.job.configs)) for t in run.samples[role].flat(c)]
        wall = sum(t.wall_ns for t in timed)
        ratios[role] = sum(t.cpu_ns for t in timed) / wall if wall > 0 else 0.0
    return ratios


def _stopping(job: TimingJob, ended: Ending, pairs: int) -> dict[str, Any]:
    if not job.sequential or (pairs == 1 and job.rounds <= job.min_rounds):
        return {"rule": "fixed rounds", "ended_by": ended.by}
    least = job.min_rounds if pairs == 1 else MIN_PAIR_ROUNDS
    record = {"rule": "sequential", "settled_early": ended.look is not None, "min_rounds": least, "ended_by": ended.by}
    if ended.look is not None:
        record["look"] = ended.look.to_json()
    return record


def _cross_check(samples: dict[str, Samples], configs: int) -> list[str]:
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
