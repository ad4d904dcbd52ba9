"""The A/B timing protocol between a baseline worker and a candidate worker.

- Baseline and candidate live in separate sandboxed processes; the baseline's
  process never imported candidate code.
- Both are frozen (SIGSTOP) except while serving one request. Each timed call's
  inputs are drawn here and written into the sealed input segment while the
  sandbox is frozen, so they exist nowhere the candidate can read before its call.
- The time of record on a CPU is this process's clock around each call (thaw ->
  reply), less the harness overhead per call that the baseline's process shows
  beyond its own timer (the baseline is trusted code). A candidate that lies about
  its times, or moves work outside its own timer, cannot change the number; one
  whose own clock disagrees grossly with ours is rejected. On a GPU the time of
  record is CUDA events, corroborated the same way with the host clock.
- Blocks alternate A B, B A, ... so drift and order effects cancel. Every timed
  call gets an input set drawn for this round (both sides get the same sets, each
  process sees each set once), so caching cannot win.
- A random subset of each candidate block's calls, chosen here in secret, is audited:
  outputs are read out of the frozen process right after the call and compared
  with the reference once the block is over.
- CPU time of every thread of the sandbox is accounted for from outside: a candidate
  using more cores than its thread budget, or more threads than the baseline plus
  that budget, is rejected with the numbers.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from kernel_agent.cases import CaseMaker, fresh_seed
from kernel_agent.sandbox.session import Timed, WorkerFailure, WorkerSession
from kernel_agent.timing import PROCESS_EFFECT, calls_per_block, speedup_interval
from kernel_agent.verify import Tolerance, compare

CLAIM_SLACK_MS = 2.0  # a worker may not claim more time than this process's clock saw, beyond this
# Our clock sees more than the worker's own (IPC, wake-up after a thaw, bookkeeping); the record is
# bounded below by our clock less a high quantile of what it adds for the trusted baseline...
OVERHEAD_QUANTILE = 0.9
# ...and a candidate whose own clock misses far more than the baseline's, in most rounds, is rejected
# (the record already makes a small lie worthless; this names a large one).
TAMPER_FRACTION = 0.35
TAMPER_MIN_MS = 0.15
TAMPER_ROUNDS_SHARE = 0.7
CORE_SLACK = 1.25  # CPU time of timed calls may exceed wall x threads by this factor (accounting granularity)...
CORE_MIN_MS = 30.0  # ...plus this much
THREAD_SLACK = 4  # threads the candidate may run beyond the baseline's count plus its thread budget
POOL_BYTES = 256 << 20  # a round's timed inputs beyond this come from a reused, rescaled pool
LARGE_SET_BYTES = 64 << 20  # one call's inputs beyond this: a few audits in all (each reference costs seconds)...
LARGE_AUDITS = 4  # ...this many per shape, anywhere among the timed calls


class TimingFailure(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


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
    timeout: float
    tolerance: Callable[[str], Tolerance]
    output_bytes: dict[Config, int]


@dataclass
class Samples:
    """Every timed call of one side: config -> round -> calls."""

    calls: list[list[list[Timed]]] = field(default_factory=list)

    def flat(self, config: int) -> list[Timed]:
        return [t for block in self.calls[config] for t in block]


def measure_speedup(job: TimingJob) -> tuple[dict[str, Any], list[str]]:
    # This process stays single-threaded while blocks are timed: idle OpenMP threads spin after
    # each parallel region and would steal cores from whichever side is timed next.
    with _single_threaded():
        return _measure(job)


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
        status = exc.status if role == "candidate" else "runtime_error"
        prefix = "during timing" if role == "candidate" else "the baseline failed during timing"
        raise TimingFailure(status, f"{prefix}: {exc.reason}") from None


def _warm_up(job: TimingJob) -> list[int]:
    """Compilation and caches out of the numbers; the baseline's speed sizes the blocks."""
    sizes = []
    for shape, dtype in job.configs:
        inputs = job.maker.inputs(shape, dtype, "normal", fresh_seed())
        per_call_ms = 0.0
        for role, side in (("baseline", job.baseline), ("candidate", job.candidate)):
            message = {"cmd": "warmup", "min_calls": 10, "min_seconds": 0.025, "max_seconds": job.timeout / 4}
            with _failures_of(role):
                reply = side.request({**message, **side.place(inputs)}, "warmup")
            if role == "baseline":
                per_call_ms = 1000 * float(reply.get("seconds", 0)) / max(1, int(reply.get("calls", 1)))
        sizes.append(calls_per_block(per_call_ms, job.target_block_ms / len(job.configs)))
    return sizes


@dataclass
class CallInputs:
    """One timed call's inputs: a drawn set, and the factor its floating tensors are scaled by (None: as drawn)."""

    tensors: list[torch.Tensor]
    scale: float | None = None

    def materialize(self) -> list[torch.Tensor]:
        """The inputs exactly as the worker got them (for an audit's reference)."""
        if self.scale is None:
            return self.tensors
        return [t * self.scale if t.is_floating_point() else t for t in self.tensors]


class InputPlan:
    """Fresh inputs for every timed call, within a memory bound.

    While a round's sets fit in POOL_BYTES every call gets a set drawn for it (both sides get
    the same sets, each process sees each set once). Larger problems draw a small pool once and
    hand each call a pool set scaled by a fresh random factor in [0.9, 1): new contents every
    call (no content cache can hit), the same value ranges, one pass to write."""

    def __init__(self, job: TimingJob, config: Config, calls: int, rng: secrets.SystemRandom) -> None:
        self.job, self.config, self.calls, self.rng = job, config, calls, rng
        first = self._draw()
        self.set_bytes = sum(t.numel() * t.element_size() for t in first)
        self.pool: list[list[torch.Tensor]] | None = None
        if self.set_bytes * calls > POOL_BYTES:
            self.pool = [first] + [self._draw() for _ in range(max(1, min(calls, POOL_BYTES // max(1, self.set_bytes))) - 1)]

    def _draw(self) -> list[torch.Tensor]:
        shape, dtype = self.config
        return self.job.maker.inputs(shape, dtype, "normal", fresh_seed())

    def round(self) -> list[CallInputs]:
        if self.pool is None:
            return [CallInputs(self._draw()) for _ in range(self.calls)]
        return [CallInputs(self.pool[i % len(self.pool)], 0.9 + 0.1 * self.rng.random()) for i in range(self.calls)]

    def audit_picks(self, rounds: int) -> set[tuple[int, int]]:
        """(round, call) pairs to audit, chosen now and kept here: a fraction of every block for
        small problems; a few in all for large ones (each reference costs seconds there)."""
        if self.set_bytes <= LARGE_SET_BYTES:
            count = max(1, round(self.job.audit_fraction * self.calls))
            return {(r, i) for r in range(rounds) for i in self.rng.sample(range(self.calls), count)}
        everything = [(r, i) for r in range(rounds) for i in range(self.calls)]
        return set(self.rng.sample(everything, min(len(everything), LARGE_AUDITS)))


def _measure(job: TimingJob) -> tuple[dict[str, Any], list[str]]:
    rng = secrets.SystemRandom()
    block_sizes = _warm_up(job)
    plans = [InputPlan(job, config, n, rng) for config, n in zip(job.configs, block_sizes)]
    picks = [plan.audit_picks(job.rounds) for plan in plans]
    samples = {"baseline": Samples([[] for _ in job.configs]), "candidate": Samples([[] for _ in job.configs])}
    audited = 0
    for round_index in range(job.rounds):
        round_sets = [plan.round() for plan in plans]
        order = [("baseline", job.baseline), ("candidate", job.candidate)]
        if round_index % 2:
            order.reverse()
        for role, side in order:
            for c, sets in enumerate(round_sets):
                block, fetched = [], []
                for i, call in enumerate(sets):
                    with _failures_of(role):
                        timed = side.timed_call(call.tensors, integrity=i == len(sets) - 1, scale=call.scale)
                        if role == "candidate" and (round_index, i) in picks[c]:
                            fetched.append((call, side.read(timed.outputs, job.output_bytes[job.configs[c]])))
                    if timed.host_ms > timed.trusted_ms + CLAIM_SLACK_MS:
                        raise TimingFailure("rejected", f"{role} claimed {timed.host_ms:.2f} ms for a call that took {timed.trusted_ms:.2f} ms (forged timer)")
                    block.append(timed)
                samples[role].calls[c].append(block)
                _check_audits(job, fetched, job.configs[c][1], audited)
                audited += len(fetched)
        del round_sets
    inputs = [f"a pool of {len(plan.pool)} drawn sets, rescaled per call" if plan.pool else "drawn per call" for plan in plans]
    return _summarize(job, samples, block_sizes, audited, inputs)


def _check_audits(job: TimingJob, fetched: list[tuple[CallInputs, list]], dtype: str, before: int) -> None:
    """Compare audited outputs with the reference, after the block (both sandboxes are frozen)."""
    for number, (call, outputs) in enumerate(fetched):
        gold, base = job.maker.reference(call.materialize())
        result = compare(outputs, gold, base, job.tolerance(dtype))
        if not result.passed:
            assert result.mismatch is not None
            raise TimingFailure("incorrect", f"audited timed call {before + number + 1} returned a wrong result: {result.mismatch.line()}")


def claim_ms(timed: Timed, device: str) -> float:
    """What the worker says one call took: CUDA events on a GPU, its host clock on a CPU."""
    return timed.device_ms if device == "cuda" and timed.device_ms is not None else timed.host_ms


def overhead_bound(samples: Samples, config: int, device: str) -> float:
    """A high quantile of what this process's clock adds to the trusted baseline's own claims per call
    (IPC, wake-up after thawing, the worker's bookkeeping)."""
    return float(np.quantile([t.trusted_ms - claim_ms(t, device) for t in samples.flat(config)], OVERHEAD_QUANTILE))


def record_ms(timed: Timed, bound_ms: float, device: str) -> float:
    """The time of record of one call: the worker's claim, but never less than this process's clock
    minus the harness overhead bound. An honest claim stands (it is the precise number); a claim
    below what our clock saw cannot lower the record by more than the baseline's overhead spread."""
    return max(claim_ms(timed, device), timed.trusted_ms - bound_ms, 1e-4)


def timer_mismatch(candidate: list[list[Timed]], baseline: list[list[Timed]], device: str) -> str | None:
    """A reason when, round after round, the candidate's own clock misses far more of each call than
    the baseline's misses of its calls in the same round (load that hits one block cancels out)."""
    excess, claims = [], []
    for cand_block, base_block in zip(candidate, baseline):
        cand_gap = float(np.median([t.trusted_ms - claim_ms(t, device) for t in cand_block]))
        base_gap = float(np.median([t.trusted_ms - claim_ms(t, device) for t in base_block]))
        excess.append(cand_gap - base_gap)
        claims += [claim_ms(t, device) for t in cand_block]
    if not excess:
        return None
    typical, claimed = float(np.median(excess)), float(np.median(claims))
    threshold = max(TAMPER_MIN_MS, TAMPER_FRACTION * claimed)
    persistent = sum(e > threshold for e in excess) >= TAMPER_ROUNDS_SHARE * len(excess)
    if typical > threshold and persistent:
        return (
            f"timer mismatch: the candidate's own clock claims {claimed:.3f} ms per call but the orchestrator's clock sees "
            f"{typical:.3f} ms more per call than it sees for the baseline, in {sum(e > threshold for e in excess)} of {len(excess)} rounds: "
            "a forged or bypassed timer, or work hidden from it"
        )
    return None


def _work_rules(job: TimingJob, samples: dict[str, Samples]) -> None:
    """Reject a candidate whose sandbox did more work, or ran more threads, than its budget allows."""
    calls = [t for c in range(len(job.configs)) for t in samples["candidate"].flat(c)]
    cpu_ms = sum(t.cpu_ns for t in calls) / 1e6
    wall_ms = sum(t.window_ns for t in calls) / 1e6
    allowed = wall_ms * job.threads * CORE_SLACK + CORE_MIN_MS
    if cpu_ms > allowed:
        raise TimingFailure(
            "rejected",
            f"the candidate's sandbox used {cpu_ms:.0f} ms of CPU during {wall_ms:.0f} ms of timed calls: more than its {job.threads} thread(s) allow",
        )
    cand, base = job.candidate.accounting.max_threads, job.baseline.accounting.max_threads
    if cand > base + job.threads + THREAD_SLACK:
        raise TimingFailure("rejected", f"the candidate's sandbox ran {cand} threads where the baseline's runs {base} (thread budget {job.threads})")


def _summarize(job: TimingJob, samples: dict[str, Samples], block_sizes: list[int], audited: int, inputs: list[str]) -> tuple[dict[str, Any], list[str]]:
    _work_rules(job, samples)
    flags: list[str] = []
    per_side: dict[str, list[list[list[float]]]] = {"baseline": [], "candidate": []}
    bounds = []
    for c in range(len(job.configs)):
        reason = timer_mismatch(samples["candidate"].calls[c], samples["baseline"].calls[c], job.device)
        if reason:
            raise TimingFailure("rejected", reason)
        bound = overhead_bound(samples["baseline"], c, job.device)
        bounds.append(bound)
        for role in per_side:
            per_side[role].append([[record_ms(t, bound, job.device) for t in block] for block in samples[role].calls[c]])
    if job.device == "cuda":
        flags += _cross_check(samples, len(job.configs))
    estimate = speedup_interval(per_side["baseline"], per_side["candidate"])
    result = {
        "speedup": estimate.speedup,
        "speedup_ci": [estimate.ci_low, estimate.ci_high],
        "statistical_ci": estimate.statistical_ci,
        "process_effect": PROCESS_EFFECT,
        "baseline": vars(estimate.baseline),
        "candidate": vars(estimate.candidate),
        "rounds": estimate.rounds,
        "calls_per_block": block_sizes,
        "per_shape": [{"shape": list(shape), "dtype": dtype, **ps} for (shape, dtype), ps in zip(job.configs, estimate.per_shape)],
        "audited_calls": audited,
        "overhead_bound_ms": bounds,
        "fresh_inputs_every_call": True,
        "timed_inputs": inputs,
        "clock": ("cuda events" if job.device == "cuda" else "worker perf_counter_ns") + ", bounded below by the orchestrator's clock per call less the baseline's overhead",
        "threads": job.threads,
        "accounting": {"baseline": job.baseline.accounting.to_json(), "candidate": job.candidate.accounting.to_json()},
    }
    return result, flags


def _cross_check(samples: dict[str, Samples], configs: int) -> list[str]:
    """On a GPU: the worker's host clock around the call against its device events, with the baseline's gap as the norm."""
    cand = [t for c in range(configs) for t in samples["candidate"].flat(c)]
    base = [t for c in range(configs) for t in samples["baseline"].flat(c)]
    cand_gap = float(np.median([t.host_ms - (t.device_ms or 0.0) for t in cand]))
    base_gap = float(np.median([t.host_ms - (t.device_ms or 0.0) for t in base]))
    cand_ms = float(np.median([t.device_ms or 0.0 for t in cand]))
    if cand_gap > base_gap + max(0.1 * cand_ms, 0.05):
        return [f"host clock exceeds device events by {cand_gap - base_gap:.3f} ms per call more than the baseline's (side-stream or background work?)"]
    return []
