"""Sequential stopping: plain cases stop at the first look, close ones run on, and repeated looks do not
inflate the false-accept rate (simulated rounds shaped like this machine's: 2-5% noise per call)."""

from __future__ import annotations

import numpy as np

from kernel_agent.timing.sequential import _T_95, _T_999, MIN_ROUNDS, Settled, look, t_quantile
from kernel_agent.timing.stats import point_speedup


def rounds(ms: float, n: int, rng: np.random.Generator, noise: float = 0.03, per_round: int = 8) -> list[list[float]]:
    return [list(ms * (1 + noise * rng.standard_normal(per_round))) for _ in range(n)]


def first_settled(base_ms: float, cand_ms: float, seed: int, max_rounds: int = 10, **kwargs) -> tuple[int, Settled]:
    """The round at which the looks first settle (max_rounds and None when none does)."""
    rng = np.random.default_rng(seed)
    base, cand = [rounds(base_ms, max_rounds, rng)], [rounds(cand_ms, max_rounds, rng)]
    for n in range(MIN_ROUNDS, max_rounds):
        b, c = [base[0][:n]], [cand[0][:n]]
        seen = look(point_speedup(b, c), b, c, kwargs.get("min_gain", 0.02), kwargs.get("process_effect", 0.08))
        if seen.settled:
            return n, seen.settled
    return max_rounds, None


def test_a_twice_as_fast_candidate_is_settled_faster_at_the_first_look() -> None:
    for seed in range(20):
        assert first_settled(2.0, 1.0, seed) == (MIN_ROUNDS, Settled.FASTER)


def test_a_twice_as_slow_candidate_is_settled_not_faster_at_the_first_look() -> None:
    for seed in range(20):
        assert first_settled(1.0, 2.0, seed) == (MIN_ROUNDS, Settled.NOT_FASTER)


def test_a_modest_true_gain_is_never_cut_short_as_not_faster() -> None:
    """A 1.2x candidate would be `faster` at the final look: the futility stop must not take that away."""
    for seed in range(50):
        _, settled = first_settled(1.2, 1.0, seed)
        assert settled is not Settled.NOT_FASTER, seed


def test_an_equal_pair_stops_early_as_not_faster_and_never_as_faster() -> None:
    """The one-sided 95% futility bound ends most A/A verdicts at the first look (at 99.9% none ended
    before the last round); none of them is ever settled faster."""
    seen = [first_settled(1.0, 1.0, seed) for seed in range(100)]
    assert all(settled is not Settled.FASTER for _, settled in seen)
    assert sum(n == MIN_ROUNDS and settled is Settled.NOT_FASTER for n, settled in seen) >= 90


def test_a_gain_just_past_the_bar_is_rarely_cut_short() -> None:
    """The futility stop's price is power: a true 1.12x (past 1.02 x 1.08) ends `not faster` at most at the 5%
    per look the one-sided bound allows, summed over the looks, and in practice far less."""
    cut = sum(first_settled(1.12, 1.0, seed)[1] is Settled.NOT_FASTER for seed in range(200))
    assert cut / 200 <= 0.05


def test_the_early_interval_of_a_settled_look_holds_the_bar_on_the_right_side() -> None:
    rng = np.random.default_rng(3)
    b, c = [rounds(1.5, 4, rng)], [rounds(1.0, 4, rng)]
    seen = look(point_speedup(b, c), b, c, 0.02)
    assert seen.settled is Settled.FASTER and seen.ci[0] > 1.02
    assert seen.ci[0] < seen.statistical_ci[0] < seen.speedup < seen.statistical_ci[1] < seen.ci[1]


def test_repeated_looks_keep_the_false_accept_rate_under_the_union_bound() -> None:
    """The null at its edge (true speedup exactly 1 + min_gain, no between-process term to hide behind):
    over 2000 verdicts, the early looks accept at most 6 x 0.05% of them (plus sampling error). A look at
    a plain 95% bootstrap-like level every round would accept several percent."""
    accepted = 0
    for seed in range(2000):
        _, settled = first_settled(1.0, 1.0, seed, min_gain=0.0, process_effect=0.0)
        accepted += settled is Settled.FASTER
    assert accepted / 2000 <= 0.006


def test_t_quantiles_are_the_tabled_ones_and_round_towards_the_wider_interval() -> None:
    assert t_quantile(3) == 12.924 and t_quantile(9) == 4.781
    assert t_quantile(22) == _T_999[20] > _T_999[25]  # between tabled values: the wider one
    assert t_quantile(500) == _T_999[120]
    assert t_quantile(0) == float("inf")
    assert t_quantile(3, _T_95) == 2.353 and t_quantile(22, _T_95) == _T_95[20]
    values = [t_quantile(df) for df in range(1, 200)]
    assert all(a >= b for a, b in zip(values, values[1:]))
