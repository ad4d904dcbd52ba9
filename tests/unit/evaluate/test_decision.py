"""The one decision every timed verdict goes through (kernel_agent/evaluate/decision.py)."""

from __future__ import annotations

from kernel_agent.core.verdict import Status
from kernel_agent.evaluate.decision import decide
from kernel_agent.measure.stats import Summary
from kernel_agent.measure.timing_result import TimingResult

SIDE = Summary(1.0, 1.0, 1.0, 1.0, 1)


def estimate(speedup: float, low: float, high: float) -> TimingResult:
    return TimingResult(
        speedup=speedup, speedup_ci=(low, high), ci_level="95%", statistical_ci=(low, high), process_effect=0.08,
        baseline=SIDE, candidate=SIDE, rounds=10, max_rounds=10, stopping={}, calls_per_block=[4],
        calls_per_request=[1], per_shape=[], audited_calls=4, record_floor_ms=[0.05], timed_inputs=[], clock="",
        threads=1, work_budget_exceeded=None, contention=None, accounting={},
    )  # fmt: skip


def test_the_low_end_of_the_interval_decides_faster() -> None:
    assert decide(estimate(1.5, 1.3, 1.7), [], 0.02, 10.0, []).status is Status.FASTER
    slow = decide(estimate(1.05, 1.01, 1.09), [], 0.02, 10.0, [])
    assert slow.status is Status.CORRECT and "does not clear 1.02" in slow.reason


def test_anything_a_human_must_see_flags_it() -> None:
    over = decide(estimate(12.0, 11.0, 13.0), [], 0.02, 10.0, [])
    assert over.status is Status.FLAGGED and "sanity bound 10x" in over.reason
    raised = decide(estimate(2.0, 1.8, 2.2), ["host clock exceeds device events"], 0.02, 10.0, [])
    assert raised.status is Status.FLAGGED and raised.flags == ("host clock exceeds device events",)


def test_a_time_under_the_roofline_floor_is_flagged_and_one_above_is_not() -> None:
    under = {"shape": [256, 2048], "candidate_median_ms": 1.0, "floor_ms": 4.2, "candidate_faster_than_floor": True}
    above = {"shape": [256, 2048], "candidate_median_ms": 1.0, "floor_ms": 0.004, "candidate_faster_than_floor": False}
    flagged = decide(estimate(2.0, 1.8, 2.2), [], 0.02, 10.0, [under])
    assert flagged.status is Status.FLAGGED and "faster than the roofline floor 4.2 ms" in flagged.reason
    assert decide(estimate(2.0, 1.8, 2.2), [], 0.02, 10.0, [above]).status is Status.FASTER
