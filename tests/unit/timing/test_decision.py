"""The one decision every timed verdict goes through (kernel_agent/timing/decision.py)."""

from __future__ import annotations

from kernel_agent.core.timing_result import Accounts, Resolution, SandboxAccount, SideRatios, Summary, TimingResult
from kernel_agent.core.verdict import Status
from kernel_agent.measure.roofline import RooflineRow, SideTime
from kernel_agent.measure.work import WorkCounts
from kernel_agent.timing.decision import decide
from kernel_agent.timing.speed_class import SpeedClass

SIDE = Summary(1.0, 1.0, 1.0, 1.0, 1)


def estimate(speedup: float, low: float, high: float, **more) -> TimingResult:
    fields = dict(
        speedup=speedup, speedup_ci=(low, high), ci_level="95%", statistical_ci=(low, high), process_effect=0.08,
        baseline=SIDE, candidate=SIDE, rounds=10, max_rounds=10, stopping=None, calls_per_block=[4],
        calls_per_request=[1], per_shape=[], audited_calls=4, record_floor_ms=[0.05], timed_inputs=[], clock="",
        threads=1, work_budget_exceeded=None, contention=None, accounting=None,
    )  # fmt: skip
    return TimingResult(**{**fields, **more})


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
    counts = WorkCounts(None, 4 * 256 * 2048 * 2, None, "none")
    under = RooflineRow((256, 2048), "float32", counts, 4.2, "memory", candidate=SideTime.at(1.0, counts, 4.2))
    above = RooflineRow((256, 2048), "float32", counts, 0.004, "memory", candidate=SideTime.at(1.0, counts, 0.004))
    flagged = decide(estimate(2.0, 1.8, 2.2), [], 0.02, 10.0, [under])
    assert flagged.status is Status.FLAGGED and "faster than the roofline floor 4.2 ms" in flagged.reason
    assert "on shape [256, 2048]," in flagged.reason  # the stored reason's words, as before the row was typed
    assert decide(estimate(2.0, 1.8, 2.2), [], 0.02, 10.0, [above]).status is Status.FASTER


def test_a_correct_verdict_says_same_slow_or_could_not_resolve() -> None:
    """The four classes (timing/speed_class.py) in the status's reason, with the target and the MDE."""
    target = Resolution(target=0.03, half_width=0.05, mde=0.094, ended_by="rounds", budget_s=8.0)
    same = decide(estimate(1.0, 0.985, 1.015, resolution=target), [], 0.02, 10.0, [])
    assert same.status is Status.CORRECT and same.speed is SpeedClass.SAME
    assert "correct but not faster" in same.reason and "same speed within 3%" in same.reason
    wide = decide(estimate(1.0, 0.92, 1.09, resolution=target), [], 0.02, 10.0, [])
    assert wide.speed is SpeedClass.AMBIGUOUS and "could not resolve: +-9%" in wide.reason and "9% gain" in wide.reason
    slow = decide(estimate(0.5, 0.49, 0.51, resolution=target), [], 0.02, 10.0, [])
    assert slow.speed is SpeedClass.SLOW and slow.status is Status.CORRECT
    fast = decide(estimate(1.5, 1.3, 1.7, resolution=target), [], 0.02, 10.0, [])
    assert fast.status is Status.FASTER and fast.speed is SpeedClass.FAST and fast.reason == ""
    assert decide(estimate(12.0, 11.0, 13.0), [], 0.02, 10.0, []).speed is None  # flagged: a human decides


def test_fast_is_refused_when_the_candidate_bought_its_time_with_cpu_the_baseline_did_not_use() -> None:
    """b61_within_slack's shape: one thread's budget, 1.25 s of CPU per second of its calls against the baseline's
    0.97: not FAST, whatever the interval. Within the budget and the baseline's ratio it stands; two threads'
    budget lets a candidate use two cores."""
    hidden = SideRatios(baseline=0.97, candidate=1.25)
    refused = decide(estimate(1.2, 1.1, 1.3, cpu_per_wall=hidden), [], 0.02, 10.0, [])
    assert refused.status is Status.CORRECT and refused.speed is SpeedClass.AMBIGUOUS
    assert "1.25 s of CPU per second" in refused.reason
    honest = SideRatios(baseline=0.97, candidate=0.99)
    assert decide(estimate(1.2, 1.1, 1.3, cpu_per_wall=honest), [], 0.02, 10.0, []).status is Status.FASTER
    two = estimate(1.8, 1.7, 1.9, cpu_per_wall=SideRatios(baseline=0.98, candidate=1.9), threads=2)
    assert decide(two, [], 0.02, 10.0, []).status is Status.FASTER


def test_the_cpu_guard_stands_aside_where_no_core_beyond_the_budget_was_within_reach() -> None:
    """The cpu_per_wall of the demo's cpp_adamw fused seed (two OpenMP threads, a budget of both cores): 2.10, its
    spinning threads' CPU between the reply and the freeze. Held by a cpuset, or with every core in its budget,
    no core was left to hide work on; pinned by affinity alone (which the sandbox can undo) the guard stands."""
    spinning = SideRatios(baseline=0.98, candidate=2.10)

    def held(cores: str) -> TimingResult:
        sides = Accounts(
            baseline=SandboxAccount(method="cgroup"), candidate=SandboxAccount(method="cgroup", cores=cores)
        )
        return estimate(7.1, 5.2, 9.7, cpu_per_wall=spinning, threads=2, accounting=sides)

    assert decide(held("any"), [], 0.02, 10.0, []).status is Status.FASTER
    assert decide(held("cpuset 0-1"), [], 0.02, 10.0, []).status is Status.FASTER
    refused = decide(held("affinity"), [], 0.02, 10.0, [])
    assert refused.status is Status.CORRECT and "2.10 s of CPU per second" in refused.reason
