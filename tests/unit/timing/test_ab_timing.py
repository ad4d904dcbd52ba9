"""The A/B timing's arithmetic on call records shaped like real runs (no processes): the time of record,
the timer-mismatch rule, how many calls go to a request, and the thread count it borrows.

Shapes of the numbers come from this 2-core machine: the orchestrator's clock adds 0.25-0.6 ms per
call to the worker's own (thaw, IPC, bookkeeping), with load spikes of several ms in some blocks.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest
import torch

from kernel_agent.sandbox.host.accounting import Accounting
from kernel_agent.sandbox.host.session import Timed
from kernel_agent.timing.ab_timing import _single_threaded
from kernel_agent.timing.job import Samples, TimingFailure, TimingJob
from kernel_agent.timing.processes import PairRecords
from kernel_agent.timing.rounds import MAX_CALLS_PER_REQUEST, Shape, request_shape
from kernel_agent.timing.rules import overhead_bound, records_ms, timer_mismatch, times_of_record, work_rules
from kernel_agent.timing.stopping import stop_after

ROUNDS, CALLS = 10, 8


def side(
    claim_ms: float,
    real_ms: float,
    overhead_ms: float,
    seed: int,
    spikes: dict[int, float] | None = None,
    lying_rounds: set[int] | None = None,
) -> list[list[Timed]]:
    """Blocks of calls for a worker claiming `claim_ms` (in `lying_rounds`, else all rounds) that
    really spends `real_ms`."""
    rng = np.random.default_rng(seed)
    blocks = []
    for r in range(ROUNDS):
        block = []
        for _ in range(CALLS):
            noise = 1 + 0.03 * rng.standard_normal()
            extra = abs(0.05 * rng.standard_normal()) + (spikes or {}).get(r, 0.0) * rng.random()
            claim = claim_ms if lying_rounds is None or r in lying_rounds else real_ms
            block.append(Timed(real_ms * noise + overhead_ms + extra, [claim * noise], None, 0, 0, 0, [[]]))
        blocks.append(block)
    return blocks


def flat(blocks: list[list[Timed]]) -> list[Timed]:
    return [t for b in blocks for t in b]


def median_record(blocks: list[list[Timed]], baseline: list[list[Timed]]) -> float:
    bound = overhead_bound(Samples([baseline]), 0, "cpu")
    return float(np.median([r for t in flat(blocks) for r in records_ms(t, bound, "cpu")]))


def test_an_honest_fast_candidate_is_not_rejected_even_when_one_core_is_loaded() -> None:
    """Issue 11 defect 1: a constant per-call harness cost both sides pay must not look like hiding."""
    for seed in range(60):
        base = side(2.5, 2.5, 0.3, seed, spikes={2: 3.0, 7: 2.0})
        cand = side(1.06, 1.06, 0.3, seed + 1000, spikes={4: 3.0, 5: 1.0})
        assert timer_mismatch(flat(cand), flat(base), "cpu") is None


def test_a_worker_that_claims_half_its_time_is_rejected() -> None:
    for seed in range(30):
        reason = timer_mismatch(flat(side(0.9, 1.8, 0.3, seed + 1000)), flat(side(2.5, 2.5, 0.3, seed)), "cpu")
        assert reason is not None and reason.startswith("timer mismatch"), seed


def test_the_record_of_a_liar_is_the_orchestrators_clock_and_of_an_honest_worker_mostly_its_own() -> None:
    base = side(2.5, 2.5, 0.3, 1)
    assert 0.3 < overhead_bound(Samples([base]), 0, "cpu") < 0.4
    assert 1.7 < median_record(side(0.5, 1.8, 0.3, 2), base) < 1.9  # claims 0.5 ms of a 1.8 ms call
    honest = side(1.8, 1.8, 0.3, 3)
    assert abs(median_record(honest, base) - 1.8) < 0.06


def test_a_lie_in_some_rounds_only_is_not_named_and_buys_nothing() -> None:
    """The red team's evasion of a per-round vote: lie in half the rounds (issue 11 class A)."""
    base = side(2.5, 2.5, 0.3, 4)
    cand = side(0.6, 1.8, 0.3, 5, lying_rounds={0, 2, 4, 6, 8})
    assert median_record(cand, base) > 1.75


def test_a_tiny_kernel_is_timed_several_calls_to_a_request() -> None:
    """a60_tiny_forged_claim: a 0.05 ms kernel under 0.5 ms of overhead could claim anything per call;
    grouped 40 to a request, our clock around the request is mostly kernel and bounds the claims."""
    assert request_shape(2.5, 100).calls == 1
    assert request_shape(0.05, 100).calls == 40
    assert request_shape(0.0001, 100).calls == MAX_CALLS_PER_REQUEST == 64
    assert request_shape(0.0, 100).calls == 1  # no estimate from the warm-up: one call a request
    assert request_shape(0.45, 100).calls == 5  # enough calls to reach 2 ms of kernel, not merely close to it


def test_a_block_holds_about_the_target_time_whatever_the_calls_per_request() -> None:
    assert request_shape(5.0, 30.0).requests == 6
    assert request_shape(0.05, 12.0) == Shape(40, 6)  # 40 calls of 0.05 ms are one 2 ms request
    assert (
        request_shape(0.05, 300.0).requests == 10 and request_shape(50.0, 30.0).requests == 2
    )  # 2 to 10 requests a block


def test_claims_are_scaled_up_to_our_clock_never_down() -> None:
    honest = Timed(
        trusted_ms=2.5, host_ms=[0.5, 0.5, 0.5, 0.5], device_ms=None, cpu_ns=0, window_ns=0, wall_ns=0, outputs=[[]] * 4
    )
    assert records_ms(honest, 0.5, "cpu") == [0.5, 0.5, 0.5, 0.5]
    liar = Timed(
        trusted_ms=2.5, host_ms=[0.1, 0.1, 0.1, 0.1], device_ms=None, cpu_ns=0, window_ns=0, wall_ns=0, outputs=[[]] * 4
    )
    assert np.allclose(records_ms(liar, 0.5, "cpu"), [0.5, 0.5, 0.5, 0.5])


def test_an_uneven_split_of_a_requests_claims_cannot_pull_the_median_down() -> None:
    """Ten calls in one request, 5 ms on our clock: claims that put the time into one call would
    make the median call 0.1 ms if the claims were scaled; the record shares the request equally."""
    skewed = Timed(
        trusted_ms=5.5, host_ms=[4.1] + [0.1] * 9, device_ms=None, cpu_ns=0, window_ns=0, wall_ns=0, outputs=[[]] * 10
    )
    assert np.allclose(records_ms(skewed, 0.5, "cpu"), [0.5] * 10)


def test_overlapping_timings_restore_the_thread_count() -> None:
    """Two timings on different devices can overlap in one orchestrator: neither may leave 1 behind.

    The second timing runs in a thread started while the first held the count at 1, so that
    thread's own count reads 1 when it enters; restoring that would leave every later thread at 1."""
    before = torch.get_num_threads()
    assert before > 1, "needs a machine with at least 2 threads"
    first_in, first_may_leave, second_in, second_may_leave = (threading.Event() for _ in range(4))

    def first() -> None:
        with _single_threaded():
            first_in.set()
            first_may_leave.wait(10)

    def second() -> None:
        with _single_threaded():
            second_in.set()
            second_may_leave.wait(10)

    def threads_of_a_new_thread() -> int:
        seen: list[int] = []
        probe = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
        probe.start()
        probe.join(10)
        return seen[0]

    one = threading.Thread(target=first, daemon=True)
    one.start()
    assert first_in.wait(10)
    two = threading.Thread(target=second, daemon=True)  # started while the count is 1
    two.start()
    assert second_in.wait(10)
    first_may_leave.set()  # the first leaves before the second
    one.join(10)
    second_may_leave.set()
    two.join(10)
    assert threads_of_a_new_thread() == before


def job_of(sequential: bool, rounds: int = ROUNDS) -> TimingJob:
    """Only what the early look reads: the configs, the device, the rule and the bar."""
    fields = dict(candidate=None, baseline=None, maker=None, judge=None, expected={}, target_block_ms=100.0)
    return TimingJob(
        configs=[((64,), "float32")], device="cpu", threads=1, rounds=rounds, audit_fraction=0.2,
        min_gain=0.02, sequential=sequential, **fields,
    )  # fmt: skip


def test_the_timing_stops_at_the_first_look_that_settles_and_only_then() -> None:
    """Rounds of a 2x candidate: settled at round 4 (the minimum) under the sequential rule, never with
    fixed rounds, never before the minimum, never at the last round (the full 95% interval decides there)."""
    base, cand = side(2.0, 2.0, 0.3, 11), side(1.0, 1.0, 0.3, 12)

    def upto(n: int) -> list[PairRecords]:
        return [pair_of({"baseline": Samples([base[:n]]), "candidate": Samples([cand[:n]])})]

    def early(job: TimingJob, pairs: list[PairRecords], n: int):
        ended = stop_after(job, pairs, n, 0.0)
        return ended.look if ended is not None else None

    assert early(job_of(True), upto(3), 3) is None
    stop = early(job_of(True), upto(4), 4)
    assert stop is not None and stop.settled.value == "faster" and stop.ci[0] > 1.02 and stop.rounds == 4
    assert early(job_of(False), upto(4), 4) is None
    assert early(job_of(True, rounds=4), upto(4), 4) is None
    same = side(2.0, 2.0, 0.3, 13)
    close = [pair_of({"baseline": Samples([base[:4]]), "candidate": Samples([same[:4]])})]
    even = early(job_of(True), close, 4)  # an A/A pair: a gain past the bar is out of reach, never faster
    assert even is not None and even.settled.value == "not faster" and even.ci[0] < 1.0 < even.ci[1]


def pair_of(samples: dict[str, Samples]) -> PairRecords:
    records, _ = times_of_record(job_of(True), samples)
    return PairRecords(records["baseline"], records["candidate"])


def records_at(ms: float, spread: float, seed: int, rounds: int) -> list[list[list[float]]]:
    """One shape's times of record: `rounds` rounds of CALLS calls around `ms`, relative spread `spread`."""
    rng = np.random.default_rng(seed)
    return [[list(ms * (1 + spread * rng.standard_normal(CALLS))) for _ in range(rounds)]]


def test_several_pairs_stop_settled_same_or_at_the_budget_and_say_which() -> None:
    """Three pairs: a 2x settles at the second cycle (FAST at 99.9%); equal sides read SAME once the 95% interval
    over pairs lies within +-3%; a pair far from the others keeps the interval wide until the time budget is
    spent; before the second cycle nothing ends it."""
    job = job_of(True)

    def pairs(base_ms: list[float], cand_ms: list[float], rounds: int) -> list[PairRecords]:
        return [
            PairRecords(records_at(b, 0.01, 2 * p, rounds), records_at(c, 0.01, 2 * p + 1, rounds))
            for p, (b, c) in enumerate(zip(base_ms, cand_ms))
        ]

    fast = pairs([2.0] * 3, [1.0] * 3, 2)
    assert stop_after(job, fast, 1, 0.0) is None
    ended = stop_after(job, fast, 2, 0.0)
    assert ended is not None and ended.by == "settled" and ended.look.settled.value == "faster"
    slow = stop_after(job, pairs([1.0] * 3, [2.0] * 3, 2), 2, 0.0)
    assert slow is not None and slow.by == "settled" and slow.look.settled.value == "not faster"
    ended = stop_after(job, pairs([1.0] * 3, [1.0] * 3, 4), 4, 0.0)
    assert ended is not None and ended.by == "same" and ended.look is None
    apart = pairs([1.0] * 3, [1.0, 1.12, 0.95], 4)  # a process effect of several percent: no class yet
    assert stop_after(job, apart, 4, 1.0) is None
    ended = stop_after(job, apart, 4, job.budget_s)
    assert ended is not None and ended.by == "budget" and ended.look is None
    assert stop_after(job_of(False), apart, 4, job.budget_s) is None  # fixed rounds: every round, whatever the time


def test_the_work_budget_refuses_a_candidate_and_only_records_a_trusted_reference() -> None:
    """Three times the CPU one thread allows: a candidate is rejected; a reference point (trusted code, whose
    extra work could only understate a speedup against it) carries the reason instead."""
    from types import SimpleNamespace

    def process(threads: int) -> SimpleNamespace:
        return SimpleNamespace(accounting=Accounting(method="cgroup cpu.stat", max_threads=threads),
                               peak_tasks=lambda: threads)  # fmt: skip

    busy = [[[Timed(1.0, [1.0], None, cpu_ns=3_000_000 * 10, window_ns=0, wall_ns=10_000_000, outputs=[])]]]
    samples = {"candidate": Samples(busy), "baseline": Samples(busy)}
    job = replace(job_of(True), candidate=process(1), baseline=process(1))
    with pytest.raises(TimingFailure, match="more than its 1 thread"):
        work_rules(job, samples)
    reason = work_rules(replace(job, enforce_work_budget=False), samples)
    assert reason is not None and "30 ms of CPU during 10 ms" in reason
    calm = [[[Timed(1.0, [1.0], None, cpu_ns=9_000_000, window_ns=0, wall_ns=10_000_000, outputs=[])]]]
    assert work_rules(job, {"candidate": Samples(calm), "baseline": Samples(calm)}) is None
