"""The speedup interval, its widening by the between-process term, and the per-side times shown beside it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import shape_timing, timing_record

from kernel_agent.core.of_record import typical_ms
from kernel_agent.core.timing_result import Summary, TimingResult
from kernel_agent.timing.stats import PROCESS_EFFECT, calls_per_block, speedup_interval, widen


def rounds(ms: float, n_rounds: int = 12, per_round: int = 8, noise: float = 0.02, seed: int = 0) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(ms * (1 + noise * rng.standard_normal(per_round))) for _ in range(n_rounds)]


def test_an_a_a_run_gives_an_interval_around_one() -> None:
    estimate = speedup_interval([rounds(2.0, seed=1)], [rounds(2.0, seed=2)], resamples=500)
    assert estimate.ci_low < 1.0 < estimate.ci_high
    low, high = estimate.statistical_ci
    assert abs(estimate.speedup - 1.0) < 0.02 and high - low < 0.1  # the bootstrap alone is tight
    assert estimate.ci_high - estimate.ci_low < 2 * PROCESS_EFFECT + 0.05  # widened by the systematic term only
    assert estimate.rounds == 12 and estimate.baseline.samples == 96


def test_a_twice_as_fast_candidate_gives_about_two_and_excludes_one() -> None:
    estimate = speedup_interval([rounds(2.0, seed=3)], [rounds(1.0, seed=4)], resamples=500)
    assert estimate.speedup == pytest.approx(2.0, rel=0.02)
    assert 1.8 < estimate.ci_low < 2.0 < estimate.ci_high < 2.2


def test_the_process_effect_widens_the_bootstrap_and_never_narrows_it() -> None:
    """Resampling rounds cannot see a per-process offset; the systematic term must show in the interval."""
    estimate = speedup_interval([rounds(2.0, seed=5)], [rounds(1.0, seed=6)], resamples=500)
    low, high = estimate.statistical_ci
    assert estimate.ci_low < low < estimate.speedup < high < estimate.ci_high
    assert estimate.ci_high / estimate.speedup > 1 + PROCESS_EFFECT  # at least the systematic term, above and below
    assert estimate.speedup / estimate.ci_low > 1 + PROCESS_EFFECT


def test_drift_between_rounds_widens_the_interval() -> None:
    """The bootstrap resamples whole rounds: a candidate that is fast in some rounds only is not known to be 2x."""
    steady = speedup_interval([rounds(2.0, seed=7)], [rounds(1.0, seed=8)], resamples=500, process_effect=0)
    drifting_rounds = [r if i % 2 else [v * 1.6 for v in r] for i, r in enumerate(rounds(1.0, seed=8))]
    drifting = speedup_interval([rounds(2.0, seed=7)], [drifting_rounds], resamples=500, process_effect=0)
    assert math.log(drifting.ci_high / drifting.ci_low) > 10 * math.log(steady.ci_high / steady.ci_low)


def test_widen_adds_the_systematic_term_in_quadrature_in_log_space() -> None:
    assert widen(2.0, 1.8, 2.2, 0.0) == pytest.approx((1.8, 2.2))
    assert widen(2.0, 2.0, 2.0, 0.03) == pytest.approx((2.0 / 1.03, 2.0 * 1.03))
    low, high = widen(2.0, 2.0 / math.e**0.3, 2.0 * math.e**0.4, math.e**0.4 - 1)
    assert math.log(2.0 / low) == pytest.approx(0.5) and math.log(high / 2.0) == pytest.approx(0.4 * math.sqrt(2))


def test_typical_times_multiply_out_to_the_speedup_across_shapes() -> None:
    # Two shapes of very different size (like torch_attention): a pooled median would sit
    # between them and its ratio would not be the geometric-mean speedup.
    base = [[[10.0, 10.2, 9.9]] * 4, [[1.0, 1.02, 0.99]] * 4]
    cand = [[[5.0, 5.1, 4.9]] * 4, [[1.0, 1.01, 0.98]] * 4]
    estimate = speedup_interval(base, cand)
    timing = timing_record(
        per_shape=[
            shape_timing(base_ms=s["baseline_median_ms"], cand_ms=s["candidate_median_ms"]) for s in estimate.per_shape
        ]
    )
    assert typical_ms(timing, "baseline") / typical_ms(timing, "candidate") == pytest.approx(estimate.speedup, rel=1e-9)
    assert estimate.baseline.median_ms / estimate.candidate.median_ms != pytest.approx(estimate.speedup, rel=0.05)


def test_typical_ms_refuses_incomplete_timings() -> None:
    assert typical_ms(None, "baseline") is None
    zero = timing_record(per_shape=[shape_timing(base_ms=1.0), shape_timing(base_ms=0.0, cand_ms=1.0)])
    assert typical_ms(zero, "baseline") is None
    overall = timing_record(per_shape=[])
    assert typical_ms(overall, "baseline") == overall.baseline.median_ms  # no per-shape entries: the overall median
    stored = timing_record().to_json()
    del stored["per_shape"][0]["baseline_median_ms"]
    with pytest.raises(ValueError, match="baseline_median_ms"):  # a stored shape without its median is not read
        TimingResult.from_json(stored)
    stored["per_shape"][0]["baseline_median_ms"] = True
    with pytest.raises(ValueError, match="wrong type"):  # a bool is not a time
        TimingResult.from_json(stored)


def test_calls_per_block_fills_the_target_within_its_bounds() -> None:
    assert calls_per_block(1.0, 6.0) == 6
    assert calls_per_block(1.0, 6.4) == 6 and calls_per_block(1.0, 6.6) == 7
    assert calls_per_block(100.0, 6.0) == 2 and calls_per_block(0.01, 6.0) == 10
    assert calls_per_block(0.0, 6.0) == 10 and calls_per_block(-1.0, 6.0, hi=4) == 4


def test_summary_percentiles() -> None:
    summary = Summary.of([float(v) for v in range(1, 11)])
    assert (summary.median_ms, summary.p20_ms, summary.p80_ms, summary.mean_ms, summary.samples) == (
        5.5,
        2.8,
        8.2,
        5.5,
        10,
    )
