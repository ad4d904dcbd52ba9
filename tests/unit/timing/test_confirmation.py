"""When a small gain is timed again on fresh processes, and how the two pairs combine."""

from __future__ import annotations

import math

import pytest

from kernel_agent.core.timing_result import ShapeTiming, Summary, TimingResult, combined
from kernel_agent.timing.confirmation import CONFIRM_BELOW, needs_confirmation, reason_for
from kernel_agent.timing.stats import speedup_interval

SIDE = Summary(4.0, 3.9, 4.1, 4.0, 10)


def record(speedup: float, low: float, high: float, shapes: list[ShapeTiming], level: str = "95%", rounds: int = 10):
    return TimingResult(
        speedup=speedup, speedup_ci=(low, high), ci_level=level, statistical_ci=(low, high), process_effect=0.08,
        baseline=SIDE, candidate=SIDE, rounds=rounds, max_rounds=10, stopping=None, calls_per_block=[4],
        calls_per_request=[1], per_shape=shapes, audited_calls=4, record_floor_ms=[0.05], timed_inputs=[],
        clock="", threads=1, work_budget_exceeded=None, contention=None, accounting=None,
    )  # fmt: skip


def shape(speedup: float, low: float, high: float, base_ms: float) -> ShapeTiming:
    return ShapeTiming(
        shape=(256, 2048), dtype="float32", speedup=speedup, speedup_ci=(low, high), baseline_median_ms=base_ms,
        candidate_median_ms=base_ms / speedup, baseline_p20_ms=base_ms, candidate_p80_ms=base_ms / speedup,
    )  # fmt: skip


def pair(speedup: float, low: float, high: float, base_ms: float, level: str = "95%") -> TimingResult:
    return record(speedup, low, high, [shape(speedup, low, high, base_ms)], level)


def shapes_of(estimate) -> list[ShapeTiming]:
    return [
        ShapeTiming(shape=(64,), dtype="float32", speedup=ps["speedup"], speedup_ci=tuple(ps["speedup_ci"]),
                    baseline_median_ms=ps["baseline_median_ms"], candidate_median_ms=ps["candidate_median_ms"],
                    baseline_p20_ms=ps["baseline_p20_ms"], candidate_p80_ms=ps["candidate_p80_ms"])
        for ps in estimate.per_shape
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("speedup", "low", "expected"),
    [
        (1.14, 1.04, True),  # an honest copy's process effect can read like this
        (CONFIRM_BELOW - 0.01, 1.10, True),
        (1.45, 1.05, False),  # an early stop's wide interval around a clear win: not timed twice
        (2.0, 1.8, False),
        (1.10, 1.01, False),  # not faster in the first place
        (0.9, 0.8, False),
    ],
)
def test_only_a_small_faster_gain_is_confirmed(speedup: float, low: float, expected: bool) -> None:
    assert needs_confirmation(pair(speedup, low, speedup * 1.1, 4.0), 0.02) is expected


def test_a_clear_win_whose_calls_overlap_the_baselines_is_confirmed_too() -> None:
    """level2/67 on this VM (2026-12-03): an honest copy read 4.25x in one pair, its calls taking 1.0 s or
    8-12 s in both processes. The point alone would not send it to a second pair; the overlap does. A true
    3x gain with jittery calls keeps the two sides apart and is timed once."""
    fast, slow = 1000.0, 9000.0
    baseline = [[slow, slow], [slow, fast], [slow, slow], [fast, slow]]  # one shape, four rounds of two calls
    candidate = [[fast, fast], [fast, slow], [fast, fast], [slow, fast]]
    estimate = speedup_interval([baseline], [candidate])
    first = record(estimate.speedup, 1.5, 20.0, shapes_of(estimate), rounds=4)
    assert first.speedup > CONFIRM_BELOW
    assert needs_confirmation(first, 0.02)
    both = combined(first, first, reason_for(first, 0.02))
    assert "overlapped" in both.confirmation and "20th percentile" in both.confirmation
    jittery = [[4.0, 4.1, 9.0, 4.0], [4.0, 4.2, 4.1, 10.5]]  # a 3x gain whose candidate has two slow outliers
    steady = speedup_interval([[[12.0, 12.3, 12.1, 12.2], [12.0, 12.4, 12.5, 12.1]]], [jittery])
    assert not needs_confirmation(record(steady.speedup, 1.8, 4.0, shapes_of(steady)), 0.02)


def test_two_pairs_give_the_geometric_mean_and_the_hull() -> None:
    first, second = pair(1.14, 1.04, 1.25, 4.4, "99.9% sequential"), pair(1.00, 0.92, 1.09, 4.0)
    both = combined(first, second, reason_for(first, 0.02))
    assert both.speedup == pytest.approx(math.sqrt(1.14))
    assert both.speedup_ci == (0.92, 1.25)  # the low end no longer clears 1.02: not faster
    assert both.rounds == 20
    assert [p.speedup for p in both.pairs] == [1.14, 1.00]
    assert both.pairs[0].ci_level == "99.9% sequential"
    assert "99.9% sequential and 95%" in both.ci_level
    merged = both.per_shape[0]
    # each shape's medians are combined so that their ratio is still the reported point
    assert merged.baseline_median_ms / merged.candidate_median_ms == pytest.approx(both.speedup)
    assert merged.speedup_ci == (0.92, 1.25)
    record_json = both.to_json()
    assert record_json["pairs"][1]["speedup"] == 1.0 and record_json["confirmation"].startswith("the first pair's")
