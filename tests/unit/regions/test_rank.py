"""The Amdahl bounds and the share of a region over timed rounds."""

from __future__ import annotations

import pytest

from kernel_agent.regions.rank import Timing, amdahl, combined, share


def test_amdahl_at_two_at_a_speedup_and_at_infinity() -> None:
    assert amdahl(0.5, 2.0) == pytest.approx(1 / 0.75)
    assert amdahl(0.5, None) == pytest.approx(2.0)
    assert amdahl(0.2, 1.0) == pytest.approx(1.0)
    assert amdahl(1.0, None) is None  # all of the time made free: no finite bound
    assert combined([0.3, 0.2], [2.0, 4.0]) == pytest.approx(1 / (0.5 + 0.15 + 0.05))
    assert combined([0.6, 0.5], [None, None]) is None  # noisy medians summing past 1 do not divide by zero


def test_share_is_the_median_over_rounds_with_an_interval_around_it() -> None:
    rounds = [[1.0, 1.0, 2.0], [1.0, 2.0, 1.0], [1.0, 1.0, 1.0], [2.0, 1.0, 1.0], [1.0, 1.0, 2.0]]
    timing = Timing("x", rounds, 4.0, 4.0, None)
    f, lo, hi = share(timing, {2})
    assert f == pytest.approx(1 / 3)  # op 2's share per round: .5, .25, .33, .25, .5
    assert 0.25 <= lo <= f <= hi <= 0.5
    assert share(timing, {0, 1, 2})[:1] == (1.0,)
