"""The interval over pairs of processes and the MDE (kernel_agent/timing/processes.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from conftest import timing_record

from kernel_agent.core.timing_result import Resolution, TimingResult
from kernel_agent.timing.processes import LEVELS, PairRecords, estimate, mde, t_quantile
from kernel_agent.timing.speed_class import SpeedClass, classify, label


def pair(base_ms: float, cand_ms: float, seed: int, rounds: int = 6, spread: float = 0.01) -> PairRecords:
    rng = np.random.default_rng(seed)

    def side(ms: float) -> list[list[list[float]]]:
        return [[list(ms * (1 + spread * rng.standard_normal(8))) for _ in range(rounds)]]

    return PairRecords(side(base_ms), side(cand_ms))


def test_a_process_effect_widens_the_interval_that_rounds_alone_would_keep_narrow() -> None:
    """Three pairs whose candidates run 0%, +8% and -5% apart for their whole life: each pair's rounds agree
    closely, so a round bootstrap would be narrow; the interval over pairs is not, and the effect is measured."""
    steady = estimate([pair(1.0, 1.0, s) for s in range(3)])
    apart = estimate([pair(1.0, scale, s) for s, scale in enumerate((1.0, 1.08, 0.95))])
    assert steady.ci[0] > 0.97 and steady.ci[1] < 1.03 and steady.process_effect < 0.01
    assert apart.within_se < 0.01 and apart.process_effect > 0.04
    assert apart.ci[0] < 0.9 and apart.ci[1] > 1.05 and apart.half_width > 3 * steady.half_width
    assert classify(steady.ci, 0.02, 0.03) is SpeedClass.SAME
    assert classify(apart.ci, 0.02, 0.03) is SpeedClass.AMBIGUOUS


def test_the_interval_never_goes_below_what_round_noise_gives_and_every_pair_weighs_alike() -> None:
    """Three pairs that happen to agree exactly (the same records, so a between-pair spread of 0) still carry
    their rounds' noise; the point is the geometric mean of the pairs' own speedups."""
    noisy = pair(1.0, 1.0, 7, spread=0.1)
    result = estimate([noisy, noisy, noisy])
    assert result.between_sd == 0 and result.se == result.within_se > 0
    assert result.df == result.within_df == 15  # round noise is known from the rounds: t(15), not t(2)
    half = math.log(result.ci[1] / result.ci[0]) / 2
    assert math.isclose(half, t_quantile(15, LEVELS["95%"]) * result.within_se)
    assert result.ci[0] < result.speedup < result.ci[1] and result.ci[1] / result.ci[0] > 1.03
    mixed = estimate([pair(1.0, 1.0, 1), pair(2.0, 1.0, 2), pair(1.0, 2.0, 3)])
    assert math.isclose(mixed.speedup, math.exp(np.mean([math.log(s) for s in mixed.pair_speedups])))
    assert 0.95 < mixed.speedup < 1.05


def test_the_mde_grows_with_the_standard_error_and_shrinks_with_degrees_of_freedom() -> None:
    """80% power at a two-sided 95% level: (1 + min_gain) exp((t_975 + t_80) se) - 1."""
    assert math.isclose(mde(0.01, 120, 0.02), 1.02 * math.exp((1.980 + 0.845) * 0.01) - 1)
    assert mde(0.01, 2, 0.02) > mde(0.01, 10, 0.02) > mde(0.005, 10, 0.02) > 0.02
    assert mde(math.inf, 2, 0.02) == math.inf and mde(0.01, 0, 0.02) == math.inf


def test_the_classes_are_checked_fast_and_slow_first_then_same() -> None:
    assert classify((1.021, 1.029), 0.02, 0.03) is SpeedClass.FAST  # precise and past the bar: FAST, not SAME
    assert classify((0.95, 0.97), 0.02, 0.03) is SpeedClass.SLOW
    assert classify((0.975, 1.025), 0.02, 0.03) is SpeedClass.SAME
    assert classify((0.99, 1.04), 0.02, 0.03) is SpeedClass.AMBIGUOUS  # past +3%, not past the bar at its low end


def test_the_stored_class_is_read_back_and_a_verdict_timed_before_issue_36_has_none() -> None:
    """`runs show` and the report read the class from the timing JSON; old verdicts carry no `resolution`."""
    said = Resolution(target=0.03, half_width=0.01, mde=0.05, ended_by="same", budget_s=8.0)
    same = TimingResult.from_json(timing_record(resolution=replace(said, speed_class="SAME")).to_json())
    assert label(same) == "SAME"
    assert label(timing_record()) is None  # timed before there were classes: no resolution
    assert label(timing_record(resolution=replace(said, speed_class="FASTEST"))) is None and label(None) is None


def test_the_interval_covers_the_true_speedup_with_or_without_a_process_effect() -> None:
    """Simulated A/B timings of a true 3% gain on three pairs: each process runs at its own speed for its whole
    life (sd 0%, 1% or 4% per process) and each call has 2% noise. The 95% interval must cover 1.03 in at least
    93% of 600 verdicts whichever term sets its width (the pairs' t interval alone is exact; the round-noise
    floor only widens it)."""
    rng = np.random.default_rng(36)
    for effect in (0.0, 0.01, 0.04):
        covered = 0
        for _ in range(600):
            pairs = []
            for _ in range(3):
                base, cand = 1.03 * math.exp(effect * rng.standard_normal()), math.exp(effect * rng.standard_normal())
                side = [[list(base * (1 + 0.02 * rng.standard_normal(8))) for _ in range(4)]]
                other = [[list(cand * (1 + 0.02 * rng.standard_normal(8))) for _ in range(4)]]
                pairs.append(PairRecords(side, other))
            low, high = estimate(pairs).ci
            covered += low <= 1.03 <= high
        assert covered >= 0.93 * 600, (effect, covered)
