"""Score selectors on held-out shapes from stored rows alone (DESIGN.md section 14); every metric's definition is in
`DEFINITIONS`, which the report prints beside the numbers.

A selector is fitted on the training shapes' rows only; a held-out shape among them is an error (`LeakError`),
whichever way it got there. The abstain path "times" its top k from the stored rows, so scoring a new
selector times nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernel_agent.core.timing_result import geometric_mean
from kernel_agent.core.tuning import Shape
from kernel_agent.select.abstain import Abstaining
from kernel_agent.select.base import Context, Pick, Selector
from kernel_agent.select.table import GroundTruth

TIE = 0.01  # within 1% of a time counts as equal (top-k hits, wins/ties/losses)
BOOTSTRAP = 2000

DEFINITIONS = {
    "efficiency": "per shape: best exhaustive time / the selected config's time (a failed pick falls back to the "
    "default config, as a dispatcher does); reported as the geometric mean over held-out shapes",
    "P10": "10th percentile of the per-shape efficiencies; worst: their minimum",
    "top-1": "share of shapes whose pick is within 1% of the best time",
    "top-5": "share of shapes with a config within 1% of the best among the selector's first 5",
    "tau": "Kendall's tau-b between the predicted order and the measured times of the timed configs, mean over shapes",
    "W/T/L": "shapes where the pick beats the default config by more than 1% / within 1% / loses by more",
    "vs default": "geometric mean of default time / picked time, with a 95% bootstrap interval over shapes",
    "timed": "share of the pool timed to decide, mean over shapes (a pure prediction times none)",
    "abstain": "share of shapes where confidence was below the threshold and the top k were timed instead",
}


class LeakError(ValueError):
    """A held-out shape reached a selector's training data."""


@dataclass(frozen=True)
class ShapeScore:
    shape: Shape
    pick: str
    efficiency: float
    top1: bool
    top5: bool
    tau: float | None
    vs_default: float | None
    timed: int
    abstained: bool


@dataclass(frozen=True)
class SelectorScore:
    name: str
    pool: int
    shapes: int
    geomean: float
    p10: float
    worst: float
    top1: float
    top5: float
    tau: float | None
    wins: int
    ties: int
    losses: int
    vs_default: float | None
    vs_default_ci: tuple[float, float] | None
    timed_fraction: float
    abstain_rate: float
    per_shape: tuple[ShapeScore, ...]


def score(
    selector: Selector | Abstaining,
    table: GroundTruth,
    train: list[Shape],
    heldout: list[Shape],
    context: Context,
) -> SelectorScore:
    """Fit on `train` rows, then score every held-out shape that has a timed config."""
    overlap = set(train) & set(heldout)
    if overlap:
        raise LeakError(f"shape {list(sorted(overlap)[0])} is both a training and a held-out shape")
    base = selector.base if isinstance(selector, Abstaining) else selector
    base.fit(table.subset(train), context)
    leaked = selector.seen_shapes & set(heldout)
    if leaked:
        raise LeakError(f"held-out shape {list(sorted(leaked)[0])} is in {selector.name}'s training data")
    rows = [_shape_score(selector, table, s) for s in heldout if table.times.get(s)]
    if not rows:
        raise ValueError("no held-out shape has a timed config: run kernel-agent tune with --shapes heldout first")
    return _summary(selector.name, len(table.pool), rows)


def stored_timer(table: GroundTruth):  # noqa: ANN201 - abstain.Timer
    """The abstain path's timer when scoring: the stored times of the configs it asks for."""
    return lambda shape, keys: {k: ms for k in keys if (ms := table.time_of(shape, k)) is not None}


def _shape_score(selector: Selector | Abstaining, table: GroundTruth, shape: Shape) -> ShapeScore:
    pick: Pick = (
        selector.select(shape, stored_timer(table)) if isinstance(selector, Abstaining) else selector.select(shape)
    )
    best = table.best_ms(shape)
    default_ms = table.time_of(shape, table.default) if table.default else None
    picked_ms = _picked_ms(table, shape, pick.config, default_ms)
    ranking = list(pick.ranking) or [pick.config]
    top5 = any((ms := table.time_of(shape, k)) is not None and ms <= best * (1 + TIE) for k in ranking[:5])
    return ShapeScore(
        shape=shape,
        pick=pick.config,
        efficiency=best / picked_ms,
        top1=picked_ms <= best * (1 + TIE),
        top5=top5 or picked_ms <= best * (1 + TIE),
        tau=kendall_tau(ranking, table.times[shape]),
        vs_default=None if default_ms is None else default_ms / picked_ms,
        timed=len(pick.timed),
        abstained=pick.abstained,
    )


def _picked_ms(table: GroundTruth, shape: Shape, key: str, default_ms: float | None) -> float:
    ms = table.time_of(shape, key)
    if ms is not None:
        return ms
    return default_ms if default_ms is not None else max(table.times[shape].values())


def kendall_tau(ranking: list[str], times: dict[str, float]) -> float | None:
    """Tau-b between predicted positions and measured times over the configs timed on the shape."""
    keys = [k for k in ranking if k in times]
    if len(keys) < 2:
        return None
    position = {k: i for i, k in enumerate(keys)}
    concordant = discordant = ties_x = ties_y = 0
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            dx = position[a] - position[b]
            dy = times[a] - times[b]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return (concordant - discordant) / denominator if denominator else None


def _summary(name: str, pool: int, rows: list[ShapeScore]) -> SelectorScore:
    efficiency = np.asarray([r.efficiency for r in rows])
    ratios = [r.vs_default for r in rows if r.vs_default is not None]
    taus = [r.tau for r in rows if r.tau is not None]
    return SelectorScore(
        name=name,
        pool=pool,
        shapes=len(rows),
        geomean=geometric_mean(efficiency),
        p10=float(np.percentile(efficiency, 10)),
        worst=float(efficiency.min()),
        top1=sum(r.top1 for r in rows) / len(rows),
        top5=sum(r.top5 for r in rows) / len(rows),
        tau=float(np.mean(taus)) if taus else None,
        wins=sum(1 for v in ratios if v > 1 + TIE),
        ties=sum(1 for v in ratios if 1 / (1 + TIE) <= v <= 1 + TIE),
        losses=sum(1 for v in ratios if v < 1 / (1 + TIE)),
        vs_default=geometric_mean(ratios) if ratios else None,
        vs_default_ci=_bootstrap(ratios) if ratios else None,
        timed_fraction=float(np.mean([r.timed / pool for r in rows])),
        abstain_rate=sum(r.abstained for r in rows) / len(rows),
        per_shape=tuple(rows),
    )


def _bootstrap(ratios: list[float], seed: int = 0) -> tuple[float, float]:
    logs = np.log(np.asarray(ratios))
    rng = np.random.default_rng(seed)
    draws = [np.exp(np.mean(logs[rng.integers(0, len(logs), len(logs))])) for _ in range(BOOTSTRAP)]
    low, high = np.percentile(draws, [2.5, 97.5])
    return float(low), float(high)
