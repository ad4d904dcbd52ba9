"""The time of record and the timer-mismatch rule on call records shaped like real runs (no processes).

Shapes of the numbers come from this 2-core machine: the orchestrator's clock adds 0.25-0.6 ms per
call to the worker's own (thaw, IPC, bookkeeping), with load spikes of several ms in some blocks.
"""

from __future__ import annotations

import numpy as np

from kernel_agent.measure import Samples, overhead_bound, record_ms, timer_mismatch
from kernel_agent.sandbox.session import Timed

ROUNDS, CALLS = 10, 8


def side(claim_ms: float, real_ms: float, overhead_ms: float, seed: int, spikes: dict[int, float] | None = None) -> list[list[Timed]]:
    """Blocks of calls for a worker claiming `claim_ms` that really spends `real_ms` (our clock adds `overhead_ms`)."""
    rng = np.random.default_rng(seed)
    blocks = []
    for r in range(ROUNDS):
        block = []
        for _ in range(CALLS):
            noise = 1 + 0.03 * rng.standard_normal()
            extra = abs(0.05 * rng.standard_normal()) + (spikes or {}).get(r, 0.0) * rng.random()
            block.append(Timed(real_ms * noise + overhead_ms + extra, claim_ms * noise, None, 0, 0, []))
        blocks.append(block)
    return blocks


def test_an_honest_fast_candidate_is_not_rejected_even_when_one_core_is_loaded() -> None:
    """Issue 11 defect 1: a constant per-call harness cost both sides pay must not look like hiding."""
    for seed in range(60):
        base = side(2.5, 2.5, 0.3, seed, spikes={2: 3.0, 7: 2.0})
        cand = side(1.06, 1.06, 0.3, seed + 1000, spikes={4: 3.0, 5: 1.0})
        assert timer_mismatch(cand, base, "cpu") is None


def test_a_worker_that_claims_half_its_time_is_rejected() -> None:
    for seed in range(50):
        base = side(2.5, 2.5, 0.3, seed)
        cand = side(0.9, 1.8, 0.3, seed + 1000)
        reason = timer_mismatch(cand, base, "cpu")
        assert reason is not None and reason.startswith("timer mismatch"), seed


def test_the_record_of_a_liar_is_the_orchestrators_clock_and_of_an_honest_worker_its_own() -> None:
    base = side(2.5, 2.5, 0.3, 1)
    bound = overhead_bound(Samples([base]), 0, "cpu")
    assert 0.3 < bound < 0.45
    liar = side(0.5, 1.8, 0.3, 2)  # claims 0.5 ms of a 1.8 ms call
    liar_record = float(np.median([record_ms(t, bound, "cpu") for b in liar for t in b]))
    assert 1.6 < liar_record < 1.9
    honest = side(1.8, 1.8, 0.3, 3)
    honest_records = [record_ms(t, bound, "cpu") for b in honest for t in b]
    assert abs(float(np.median(honest_records)) - 1.8) < 0.06
    assert np.mean([r == t.host_ms for r, t in zip(honest_records, (t for b in honest for t in b))]) > 0.8  # mostly its own precise clock


def test_a_small_lie_is_not_named_but_buys_almost_nothing() -> None:
    base = side(2.5, 2.5, 0.3, 4)
    cand = side(1.6, 1.8, 0.3, 5)  # hides 0.2 ms of 1.8
    assert timer_mismatch(cand, base, "cpu") is None
    bound = overhead_bound(Samples([base]), 0, "cpu")
    record = float(np.median([record_ms(t, bound, "cpu") for b in cand for t in b]))
    assert record > 1.7  # the 12% lie is worth under 6%
