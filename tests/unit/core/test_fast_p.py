"""fast_p and the geometric mean over a scripted run, against a hand count."""

from __future__ import annotations

import math

import pytest

from kernel_agent.core.fast_p import fast_p, geomean, outcome, run_metrics

# Five kernels: (best verified speedup over the baseline, eager's and compile's speedups over the same baseline).
RUN = [
    outcome("a", 3.0, {"eager": 1.5, "compile": 2.0}),  # vs eager 2.0, vs compile 1.5
    outcome("b", 1.2, {"eager": 2.4, "compile": 1.2}),  # vs eager 0.5, vs compile 1.0
    outcome("c", 0.9, {"eager": 0.3, "compile": None}),  # vs eager 3.0; no compile point (it failed)
    outcome("d", None, {"eager": 1.0, "compile": 1.0}),  # no candidate verified
    outcome("e", 1.6, {}),  # references not measured
]


def test_fast_p_against_the_baseline_is_a_hand_count() -> None:
    # Correct: a, b, c, e (4 of 5). Faster than 1.0: a, b, e. Than 1.5: a, e. Than 2.0: a.
    assert fast_p(RUN, 0.0, "baseline") == pytest.approx(4 / 5)
    assert fast_p(RUN, 1.0, "baseline") == pytest.approx(3 / 5)
    assert fast_p(RUN, 1.5, "baseline") == pytest.approx(2 / 5)
    assert fast_p(RUN, 2.0, "baseline") == pytest.approx(1 / 5)


def test_fast_p_against_eager_counts_only_kernels_with_an_eager_point() -> None:
    # Counted: a, b, c, d (e has none). Correct: a, b, c. vs eager: a 2.0, b 0.5, c 3.0.
    assert fast_p(RUN, 0.0, "eager") == pytest.approx(3 / 4)
    assert fast_p(RUN, 1.0, "eager") == pytest.approx(2 / 4)  # a, c
    assert fast_p(RUN, 1.5, "eager") == pytest.approx(2 / 4)  # a, c
    assert fast_p(RUN, 2.0, "eager") == pytest.approx(1 / 4)  # c (a is exactly 2.0: not more than 2)


def test_fast_p_against_compile_and_the_geometric_means() -> None:
    # Counted: a, b, d. vs compile: a 1.5, b 1.0 (not more than 1.0), d incorrect.
    assert fast_p(RUN, 0.0, "compile") == pytest.approx(2 / 3)
    assert fast_p(RUN, 1.0, "compile") == pytest.approx(1 / 3)
    assert fast_p(RUN, 1.5, "compile") == 0.0
    assert geomean(RUN, "baseline") == pytest.approx((3.0 * 1.2 * 0.9 * 1.6) ** (1 / 4))
    assert geomean(RUN, "eager") == pytest.approx((2.0 * 0.5 * 3.0) ** (1 / 3))
    assert geomean(RUN, "compile") == pytest.approx(math.sqrt(1.5 * 1.0))


def test_run_metrics_json_names_every_threshold_and_its_definition() -> None:
    metrics = run_metrics(RUN).to_json()
    assert metrics["n"] == {"baseline": 5, "eager": 4, "compile": 3}
    assert list(metrics["fast_p"]["eager"]) == ["fast_0", "fast_1.0", "fast_1.5", "fast_2.0"]
    assert metrics["fast_p"]["baseline"]["fast_1.5"] == pytest.approx(0.4)
    assert "fast_p" in metrics["definition"] and "geomean" in metrics["definition"]


def test_a_run_without_reference_points_has_no_eager_metrics() -> None:
    metrics = run_metrics([outcome("x", 1.3, {})]).to_json()
    assert metrics["fast_p"]["eager"]["fast_0"] is None and metrics["geomean"]["compile"] is None
    assert metrics["fast_p"]["baseline"]["fast_1.0"] == 1.0
