"""When a small gain is timed again on fresh processes, and how the two pairs combine."""

from __future__ import annotations

import math

import pytest

from kernel_agent.measure.confirmation import CONFIRM_BELOW, combined, needs_confirmation
from kernel_agent.measure.stats import speedup_interval


def pair(speedup: float, low: float, high: float, base_ms: float, level: str = "95%") -> dict:
    return {
        "speedup": speedup,
        "speedup_ci": [low, high],
        "ci_level": level,
        "rounds": 10,
        "per_shape": [
            {
                "shape": [256, 2048],
                "dtype": "float32",
                "speedup": speedup,
                "baseline_median_ms": base_ms,
                "candidate_median_ms": base_ms / speedup,
                "speedup_ci": [low, high],
            }
        ],
        "accounting": {"candidate": {"peak_rss_mb": 1.0}},
    }


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
    record = {"speedup": estimate.speedup, "speedup_ci": [1.5, 20.0], "per_shape": estimate.per_shape}
    assert record["speedup"] > CONFIRM_BELOW
    assert needs_confirmation(record, 0.02)
    both = combined({**record, "rounds": 4}, {**record, "rounds": 4}, 0.02)
    assert "overlapped" in both["confirmation"] and "20th percentile" in both["confirmation"]
    jittery = [[4.0, 4.1, 9.0, 4.0], [4.0, 4.2, 4.1, 10.5]]  # a 3x gain whose candidate has two slow outliers
    steady = speedup_interval([[[12.0, 12.3, 12.1, 12.2], [12.0, 12.4, 12.5, 12.1]]], [jittery])
    record = {"speedup": steady.speedup, "speedup_ci": [1.8, 4.0], "per_shape": steady.per_shape}
    assert not needs_confirmation(record, 0.02)


def test_two_pairs_give_the_geometric_mean_and_the_hull() -> None:
    first, second = pair(1.14, 1.04, 1.25, 4.4, "99.9% sequential"), pair(1.00, 0.92, 1.09, 4.0)
    both = combined(first, second, 0.02)
    assert both["speedup"] == pytest.approx(math.sqrt(1.14))
    assert both["speedup_ci"] == [0.92, 1.25]  # the low end no longer clears 1.02: not faster
    assert both["rounds"] == 20
    assert [p["speedup"] for p in both["pairs"]] == [1.14, 1.00]
    assert both["pairs"][0]["ci_level"] == "99.9% sequential"
    assert "99.9% sequential and 95%" in both["ci_level"]
    shape = both["per_shape"][0]
    # each shape's medians are combined so that their ratio is still the reported point
    assert shape["baseline_median_ms"] / shape["candidate_median_ms"] == pytest.approx(both["speedup"])
    assert shape["speedup_ci"] == [0.92, 1.25]
