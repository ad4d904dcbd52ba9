"""The A/B timing protocol between a baseline worker and a candidate worker.

- Baseline and candidate live in separate sandboxed processes; the baseline's
  process never imported candidate code.
- Blocks alternate A B, B A, ... so drift and order effects cancel.
- Every timed call gets an input set drawn fresh for this round (both sides get
  the same sets, each process sees each set once), so caching cannot win.
- After each candidate block, this process picks random calls to audit and
  checks their outputs against the reference: a kernel cannot know at call
  time whether its answer will be checked.
- The worker's reported times are cross-checked with this process's own clock.
"""

from __future__ import annotations

import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from kernel_agent import tensorfile
from kernel_agent.cases import CaseMaker, fresh_seed
from kernel_agent.sandbox.session import WorkerFailure, WorkerSession
from kernel_agent.timing import PROCESS_EFFECT, calls_per_block, speedup_interval, valid_samples
from kernel_agent.verify import compare

if TYPE_CHECKING:
    from kernel_agent.evaluate import Evaluation

CLAIM_SLACK_S = 0.002
GAP_CORROBORATION = 0.25  # the trusted clock must support at least a quarter of a claimed gain (calibrated on a loaded 2-core CPU)
# ...and only a discrepancy beyond the noise of two clocks on a loaded machine is tampering:
# an honest baseline against itself (claimed ~1.0x) must never be rejected for a few percent.
GAP_REJECT_RATIO = 1.2  # claimed / trusted above this (with the rule above failing): rejected
GAP_FLAG_RATIO = 1.1  # above this: flagged for a human
GAP_MIN_MS = 0.1  # and never for less than this per call: two clocks' IPC jitter on sub-millisecond kernels
GAP_HIDDEN_RATIO = 1.5  # per-block route: a third of the trusted time missing from the claims...
GAP_NOISE_MULTIPLE = 4.0  # ...by this many robust sds of the baseline's own block-to-block noise
# ...and by more than this share of the baseline's whole call: honest processes differ in harness
# overhead per call (CI saw 0.15-0.3 ms on a 0.58 ms torch.softmax against a 1.7 ms baseline).
GAP_HIDDEN_OF_BASELINE = 0.25


class TimingFailure(Exception):
    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def measure_speedup(ev: Evaluation, maker: CaseMaker, candidate: WorkerSession, baseline: WorkerSession) -> tuple[dict[str, Any], list[str]]:
    problem = ev.problem
    configs = [(shape, dtype) for dtype in problem.dtypes for shape in problem.shapes]
    # This process stays single-threaded while blocks are timed: idle OpenMP threads spin after
    # each parallel region and would steal cores from whichever side is timed next.
    with _single_threaded():
        return _measure(ev, maker, candidate, baseline, configs)


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


def _measure(ev: Evaluation, maker: CaseMaker, candidate: WorkerSession, baseline: WorkerSession, configs: list) -> tuple[dict[str, Any], list[str]]:
    options = ev.options
    folder = ev.workdir / "timing"  # trusted inputs: owned by this process, read-only to the sandbox
    folder.mkdir()
    rng = secrets.SystemRandom()

    def write_sets(tag: str, shape: tuple, dtype: str, count: int) -> tuple[list[str], list[list]]:
        names, sets = [], []
        for k in range(count):
            inputs = maker.inputs(shape, dtype, "normal", fresh_seed())
            name = f"timing/{tag}.{k}.in"
            tensorfile.write(ev.workdir / name, inputs)
            names.append(name)
            sets.append(inputs)
        return names, sets

    def ask(side: WorkerSession, message: dict[str, Any], role: str) -> dict[str, Any]:
        try:
            return side.request(message)
        except WorkerFailure as exc:
            status = exc.status if role == "candidate" else "runtime_error"
            prefix = "during timing" if role == "candidate" else "the baseline failed during timing"
            raise TimingFailure(status, f"{prefix}: {exc.reason}") from None

    # Warm-up: compilation and caches out of the numbers; estimate the block size.
    block_sizes = []
    for index, (shape, dtype) in enumerate(configs):
        names, _ = write_sets(f"warm{index}", shape, dtype, 1)
        warm = {"cmd": "warmup", "inputs": names[0], "min_calls": 10, "min_seconds": 0.025, "max_seconds": options.timeout / 4}
        reply = ask(baseline, warm, "baseline")
        ask(candidate, warm, "candidate")
        per_call_ms = 1000 * float(reply.get("seconds", 0)) / max(1, int(reply.get("calls", 1)))
        block_sizes.append(calls_per_block(per_call_ms, options.target_block_ms / len(configs)))

    samples: dict[str, list[list[list[float]]]] = {"baseline": [[] for _ in configs], "candidate": [[] for _ in configs]}
    host_samples: dict[str, list[float]] = {"baseline": [], "candidate": []}
    unexplained: dict[str, list[float]] = {"baseline": [], "candidate": []}  # ms per block the trusted clock saw beyond the claims
    claimed_blocks: dict[str, list[float]] = {"baseline": [], "candidate": []}
    block_calls: list[int] = []
    audits: list[tuple[list, list, str]] = []  # (inputs, outputs, dtype) of audited timed calls
    for round_index in range(options.rounds):
        round_sets = [write_sets(f"r{round_index}c{c}", shape, dtype, block_sizes[c]) for c, (shape, dtype) in enumerate(configs)]
        order = [("baseline", baseline), ("candidate", candidate)]
        if round_index % 2:
            order.reverse()
        for role, side in order:
            for c, (names, sets) in enumerate(round_sets):
                ask(side, {"cmd": "stage", "inputs": names}, role)
                began = time.perf_counter()
                reply = ask(side, {"cmd": "time"}, role)
                elapsed = time.perf_counter() - began
                times, host = reply.get("times_ms"), reply.get("host_ms")
                if not (isinstance(times, list) and isinstance(host, list) and len(times) == len(names) == len(host) and valid_samples(times) and valid_samples(host)):
                    raise TimingFailure("rejected", f"{role} reported malformed timings (non-finite, non-positive or the wrong count)")
                claimed = sum(host) / 1000
                if claimed > elapsed + CLAIM_SLACK_S:
                    raise TimingFailure("rejected", f"{role} claimed {claimed * 1000:.2f} ms of calls in a block that took {elapsed * 1000:.2f} ms (forged timer)")
                samples[role][c].append([float(t) for t in times])
                host_samples[role] += [float(h) - float(t) for h, t in zip(host, times)]
                unexplained[role].append((elapsed - claimed) * 1000)
                claimed_blocks[role].append(claimed * 1000)
                # Both sides get the same request sequence (stage, time, audit): their processes
                # must not differ in anything but the kernel, or the comparison is biased.
                like = _like_outputs(ev, configs[c][0], configs[c][1])
                fetched = _audit(ev, side, sets, rng, options.audit_fraction, f"{role}-r{round_index}c{c}", like)
                if role == "candidate":
                    block_calls.append(len(names))
                    audits += [(inputs, outputs, configs[c][1]) for inputs, outputs in fetched]
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()

    _check_audits(ev, maker, audits)
    # The first round's blocks carry one-time costs outside the timer (measured: the candidate's first
    # block showed 0.3-1.2 ms per call where later blocks and the baseline showed 0.15-0.3), so the
    # corroboration skips them when later rounds remain; a forger hides time in every block anyway.
    skip = len(configs) if options.rounds >= 3 else 0
    gap = _timer_gap({k: v[skip:] for k, v in unexplained.items()}, {k: v[skip:] for k, v in claimed_blocks.items()}, block_calls[skip:])
    if gap is not None and not gap.startswith("FLAG:"):
        raise TimingFailure("rejected", gap)
    estimate = speedup_interval(samples["baseline"], samples["candidate"])
    flags = _cross_check(samples, host_samples) + ([gap.removeprefix("FLAG:")] if gap else [])
    result = {
        "speedup": estimate.speedup,
        "speedup_ci": [estimate.ci_low, estimate.ci_high],
        "statistical_ci": estimate.statistical_ci,
        "process_effect": PROCESS_EFFECT,
        "baseline": vars(estimate.baseline),
        "candidate": vars(estimate.candidate),
        "rounds": estimate.rounds,
        "calls_per_block": block_sizes,
        "per_shape": [{"shape": list(shape), "dtype": dtype, **ps} for (shape, dtype), ps in zip(configs, estimate.per_shape)],
        "audited_calls": len(audits),
        "unexplained_ms_per_block": {k: float(np.median(v)) for k, v in unexplained.items()},
        "fresh_inputs_every_call": True,
        "clock": "cuda events + device-wide sync" if ev.device == "cuda" else "perf_counter_ns",
        "threads": options.threads,
    }
    return result, flags


def _like_outputs(ev: Evaluation, shape: tuple, dtype: str) -> tuple:
    """Reference outputs of a checked case with this shape and dtype: they size the audit reads."""
    for case, _name, _gold, base, _inputs in ev.cases:
        if tuple(case.shape) == tuple(shape) and case.dtype == dtype:
            return base
    raise TimingFailure("rejected", f"no checked case for shape {list(shape)} {dtype}: cannot audit its timed outputs")


def _audit(ev: Evaluation, candidate: WorkerSession, sets: list[list], rng: secrets.SystemRandom, fraction: float, tag: str, like: tuple) -> list[tuple[list, list]]:
    """Fetch a random subset of the block's timed outputs, chosen after the block ran.

    Only the outputs are read now (pinned in this process's memory); the references are
    computed after the last timed block, so no trusted-side computation runs while any
    block is timed (its threads would compete with one side of the comparison)."""
    count = max(1, round(fraction * len(sets)))
    indices = sorted(rng.sample(range(len(sets)), count))
    try:
        reply = candidate.request({"cmd": "audit", "indices": indices, "output": f"out/audit-{tag}"})
    except WorkerFailure as exc:
        raise TimingFailure(exc.status, f"during the timing audit: {exc.reason}") from None
    files = reply.get("files", [])
    if len(files) != len(indices):
        raise TimingFailure("rejected", "candidate answered the audit with the wrong number of files")
    fetched = []
    for index, name in zip(indices, files):
        outputs, _ = ev._read_outputs(name, like)
        fetched.append((sets[index], outputs))
    return fetched


def _check_audits(ev: Evaluation, maker: CaseMaker, audits: list[tuple[list, list, str]]) -> None:
    for number, (inputs, outputs, dtype) in enumerate(audits):
        gold, base = maker.reference(inputs)
        result = compare(outputs, gold, base, ev._tolerance(dtype))
        if not result.passed:
            assert result.mismatch is not None
            raise TimingFailure("incorrect", f"audited timed call {number + 1} returned a wrong result: {result.mismatch.line()}")


def _timer_gap(unexplained: dict[str, list[float]], claimed: dict[str, list[float]], calls: list[int]) -> str | None:
    """Corroborate the candidate's claimed speedup with the orchestrator's own clock.

    Inputs are staged before each `time` request, so the trusted clock around it covers the
    calls plus a per-call overhead that both processes pay alike; the baseline (trusted code,
    in a process that never ran candidate code) calibrates that overhead. A candidate that
    reports less than it spends (a patched or self-restoring timer, a forged reply, an
    impersonated worker) shows a claimed gain its trusted time does not support.

    Two routes reject. (1) Ratios of medians: the trusted clock must support a quarter of the
    claimed gain; load that slows both sides cancels. (2) Per block: every candidate block
    hides more time per call than any baseline block, by far more than the baseline's own
    block-to-block noise and by more than a quarter of the baseline's per-call time, and a
    third of the candidate's trusted time is missing from its claims. Route 2 still holds when the candidate's real speed happens to beat the baseline
    (A/A ratios swing by 20% on a loaded 2-core machine), where route 1 alone only flags.
    """
    n = np.asarray(calls, dtype=float)
    base_hidden = np.asarray(unexplained["baseline"]) / n  # ms per call beyond the claims, per block
    cand_hidden = np.asarray(unexplained["candidate"]) / n
    base_ms = float(np.median(np.asarray(claimed["baseline"]) / n))
    cand_ms = float(np.median(np.asarray(claimed["candidate"]) / n))
    overhead = float(np.median(base_hidden))
    cand_seen = float(np.median(np.asarray(claimed["candidate"]) / n + cand_hidden)) - overhead
    claimed_speedup = base_ms / cand_ms
    if claimed_speedup <= 1.0 or cand_seen - cand_ms < GAP_MIN_MS:
        return None
    trusted_speedup = base_ms / max(cand_seen, 1e-6)
    discrepancy = claimed_speedup / max(trusted_speedup, 1e-6)
    detail = f"({cand_seen:.2f} ms per call seen, {cand_ms:.2f} ms claimed): forged or bypassed timer, or work hidden from it"
    if trusted_speedup < 1.0 + GAP_CORROBORATION * (claimed_speedup - 1.0) and discrepancy > GAP_REJECT_RATIO:
        return f"timer mismatch: the candidate claimed {claimed_speedup:.2f}x but the orchestrator's clock supports only {trusted_speedup:.2f}x {detail}"
    hidden = float(np.median(cand_hidden)) - overhead
    noise = 1.4826 * float(np.median(np.abs(base_hidden - overhead)))  # robust sd of the baseline's blocks
    floor = max(GAP_MIN_MS, GAP_NOISE_MULTIPLE * noise, GAP_HIDDEN_OF_BASELINE * base_ms)
    if discrepancy > GAP_HIDDEN_RATIO and min(cand_hidden) > max(base_hidden) and hidden > floor:
        return f"timer mismatch: every timed block of the candidate hid {hidden:.2f} ms per call from its own clock, {discrepancy:.2f}x its claim {detail}"
    if discrepancy > GAP_FLAG_RATIO and claimed_speedup > 1.02:
        return (
            f"FLAG:timer discrepancy: the candidate claimed {claimed_speedup:.2f}x and the orchestrator's clock supports "
            f"{trusted_speedup:.2f}x; needs human review"
        )
    return None


def _cross_check(samples: dict[str, Any], host_gap: dict[str, list[float]]) -> list[str]:
    """Compare the worker's two clocks (device events and host) with the baseline's."""
    flags = []
    cand_ms = float(np.median([t for shape in samples["candidate"] for r in shape for t in r]))
    base_gap, cand_gap = float(np.median(host_gap["baseline"])), float(np.median(host_gap["candidate"]))
    if cand_gap > base_gap + max(0.1 * cand_ms, 0.05):
        flags.append(f"host clock exceeds device events by {cand_gap - base_gap:.3f} ms per call more than the baseline's (side-stream or background work?)")
    return flags
