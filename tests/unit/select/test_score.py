"""Selectors scored on a synthetic stored table whose best configs are known: time grows with the log distance
between the shape's first dimension and the tile, so the best tile of a shape is the one nearest to it."""

from __future__ import annotations

import math

import pytest

from kernel_agent.core.tuning import TIMED, ConfigTime, Stage, config_key
from kernel_agent.select.abstain import Abstaining
from kernel_agent.select.base import Context, Selector
from kernel_agent.select.default import DefaultConfig
from kernel_agent.select.device import DeviceFacts
from kernel_agent.select.nearest import NearestShape
from kernel_agent.select.ranker import Ranker, available
from kernel_agent.select.score import LeakError, kendall_tau, score
from kernel_agent.select.table import GroundTruth

TILES = [4, 16, 64, 256]
TRAIN = [(m, n) for m in (4, 16, 64, 256) for n in (8, 512)]
DENSE_TRAIN = [(m, n) for m in (3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384) for n in (8, 512)]
HELDOUT = [(5, 100), (20, 30), (50, 700), (300, 9)]
DEVICE = DeviceFacts("cpu", 2, 10.0, 50.0, 32 << 10, 1 << 20, 8 << 20)
CONTEXT = Context({"TILE": TILES}, DEVICE)


def synthetic_ms(shape: tuple[int, int], tile: int) -> float:
    return 1.0 + 0.2 * (math.log2(shape[0]) - math.log2(tile)) ** 2


def table(failed: tuple[tuple[int, int], int] | None = None, train: list | None = None) -> GroundTruth:
    rows = []
    for shape in (train or TRAIN) + HELDOUT:
        for tile in TILES:
            if failed == (shape, tile):
                rows.append(ConfigTime(shape, "float32", {"TILE": tile}, Stage.SCREEN, "incorrect", reason="wrong"))
            else:
                ms = synthetic_ms(shape, tile)
                rows.append(ConfigTime(shape, "float32", {"TILE": tile}, Stage.SCREEN, TIMED, ms, (ms, ms)))
    return GroundTruth.from_rows(rows, {"TILE": 4})


def best_tile(shape: tuple[int, int]) -> str:
    return config_key({"TILE": min(TILES, key=lambda t: synthetic_ms(shape, t))})


def test_nearest_shape_finds_every_known_best_and_times_nothing() -> None:
    result = score(NearestShape(), table(), TRAIN, HELDOUT, CONTEXT)
    assert [p.pick for p in result.per_shape] == [best_tile(s) for s in HELDOUT]
    assert result.geomean == pytest.approx(1.0) and result.top1 == 1.0 and result.worst == pytest.approx(1.0)
    assert result.timed_fraction == 0.0 and result.abstain_rate == 0.0
    assert result.tau is not None and result.tau > 0.5


def test_default_config_scores_below_and_counts_its_losses() -> None:
    result = score(DefaultConfig(), table(), TRAIN, HELDOUT, CONTEXT)
    assert result.geomean < 0.8  # tile 4 is best only for the first held-out shape
    assert (result.wins, result.ties, result.losses) == (0, 4, 0)  # the default against itself: all ties
    nearest = score(NearestShape(), table(), TRAIN, HELDOUT, CONTEXT)
    assert nearest.wins == 3 and nearest.ties == 1 and nearest.losses == 0
    assert nearest.vs_default is not None and nearest.vs_default > 1.2
    assert (
        nearest.vs_default_ci is not None and nearest.vs_default_ci[0] <= nearest.vs_default <= nearest.vs_default_ci[1]
    )


def test_a_failed_pick_falls_back_to_the_default() -> None:
    shape = HELDOUT[2]
    result = score(NearestShape(), table(failed=(shape, 64)), TRAIN, HELDOUT, CONTEXT)
    scored = next(p for p in result.per_shape if p.shape == shape)
    assert scored.pick == config_key({"TILE": 64})
    best = min(synthetic_ms(shape, t) for t in TILES if t != 64)
    assert scored.efficiency == pytest.approx(best / synthetic_ms(shape, 4))


class Unsure(NearestShape):
    name = "unsure"

    def confidence(self, shape, ranking) -> float:  # noqa: ANN001
        return 0.0


def test_abstaining_times_its_top_k_from_the_stored_rows() -> None:
    result = score(Abstaining(Unsure(), k=2, threshold=0.5), table(), TRAIN, HELDOUT, CONTEXT)
    assert result.abstain_rate == 1.0
    assert result.timed_fraction == pytest.approx(2 / len(TILES))
    assert result.geomean == pytest.approx(1.0)  # the best is among nearest's top two on every shape


class Peeking(Selector):
    """Reads the held-out rows it is not given: the scorer must refuse it."""

    name = "peeking"

    def __init__(self, everything: GroundTruth) -> None:
        self.everything = everything

    def fit(self, train, context) -> None:  # noqa: ANN001
        super().fit(self.everything, context)

    def rank(self, shape):  # noqa: ANN001, ANN201
        return [(self.everything.best(shape), 0.0)]


def test_a_held_out_shape_in_training_data_is_refused() -> None:
    full = table()
    with pytest.raises(LeakError, match="held-out shape"):
        score(Peeking(full), full, TRAIN, HELDOUT, CONTEXT)
    with pytest.raises(LeakError, match="both a training and a held-out"):
        score(NearestShape(), full, TRAIN + HELDOUT[:1], HELDOUT, CONTEXT)


def test_the_fitted_training_table_holds_no_held_out_shape() -> None:
    selector = NearestShape()
    score(selector, table(), TRAIN, HELDOUT, CONTEXT)
    assert set(selector.train.shapes) == set(TRAIN)
    assert not set(selector.train.times) & set(HELDOUT)


@pytest.mark.skipif(not available(), reason="lightgbm is not installed (the optional extra kernel-agent[select])")
def test_the_learned_ranker_learns_the_synthetic_rule() -> None:
    # Trees split between training values: with 4 distinct sizes one split sorts the training set and learning
    # stops, so the ranker gets a denser training set than nearest-shape needs.
    result = score(Ranker(), table(train=DENSE_TRAIN), DENSE_TRAIN, HELDOUT, CONTEXT)
    assert [p.pick for p in result.per_shape] == [best_tile(s) for s in HELDOUT]
    assert result.geomean == pytest.approx(1.0)


def test_kendall_tau_of_orders() -> None:
    times = {"a": 1.0, "b": 2.0, "c": 3.0}
    assert kendall_tau(["a", "b", "c"], times) == pytest.approx(1.0)
    assert kendall_tau(["c", "b", "a"], times) == pytest.approx(-1.0)
    assert kendall_tau(["a"], times) is None
