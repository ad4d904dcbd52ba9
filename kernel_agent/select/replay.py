"""The search provider with and without a selector's advice, replayed on stored ground truth: each proposal's
outcome is the stored time of its config (nothing is timed), so the two searches are compared side by side
on the same numbers. Counts the timed candidates each needs to reach the best config of the target shapes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from kernel_agent.core.tuning import Config, Shape, config_key, parse_config
from kernel_agent.problem.load import Problem
from kernel_agent.propose.base import Attempt, ProposalContext
from kernel_agent.propose.search import SearchProvider
from kernel_agent.propose.tunables import read_config
from kernel_agent.select.table import GroundTruth

SAMPLES = 4  # candidates per round, optimize's default


@dataclass(frozen=True)
class SearchCount:
    best_speedup: float  # the pool's best over the default config, geomean over the target shapes
    reached: float  # the best speedup this search found before it stopped
    candidates: int | None  # timed candidates until it reached the pool's best (None: never; 0: the default is)
    timed: int  # candidates it timed before it stopped


def speedup(table: GroundTruth, shapes: list[Shape], config: Config) -> float | None:
    """Geomean over shapes of default time / this config's time; None when it failed on any shape."""
    logs = []
    for shape in shapes:
        ms, base = table.time_of(shape, config_key(config)), table.time_of(shape, table.default or "")
        if ms is None or base is None:
            return None
        logs.append(math.log(base / ms))
    return math.exp(sum(logs) / len(logs))


def replay(
    problem: Problem,
    table: GroundTruth,
    shapes: list[Shape],
    first: list[Config],
    *,
    only_first: bool = False,
    rounds: int = 200,
    patience: int | None = None,
) -> SearchCount:
    """Run the search provider on stored times. With `patience`, it stops as `optimize` does (rounds spent,
    `patience` rounds in a row without a faster config, or nothing left to propose); without, at the pool's best."""
    names = list(problem.tunables)
    values = [s for c in table.pool if (s := speedup(table, shapes, parse_config(c))) is not None]
    best = max(values) if values else 1.0
    provider, history, parents = SearchProvider(first, only_first), [], []
    found, idle = 1.0, 0
    reached_at = 0 if best <= 1.0 else None  # the default is the baseline: never a candidate
    for round_index in range(1, rounds + 1):
        if patience is None and reached_at is not None:
            break
        context = ProposalContext(problem, problem.baseline_source, parents, history, {}, round_index, SAMPLES, "cpu")
        batch = provider.propose(context)
        if not batch.proposals:
            break
        improved = False
        for proposal in batch.proposals:
            config = read_config(proposal.source, names)
            value = speedup(table, shapes, config)  # the stored time: a replay, not a measurement
            status = "rejected" if value is None else ("faster" if value > 1.02 else "correct")
            attempt = Attempt(len(history) + 1, proposal.source, status, "", value, round=round_index)
            history.append(attempt)
            if value is not None and value > found:
                found, parents, improved = value, [attempt], True
            if reached_at is None and found >= best * (1 - 1e-9):
                reached_at = len(history)
        idle = 0 if improved else idle + 1
        if patience is not None and idle >= patience:
            break
    return SearchCount(best, found, reached_at, len(history))
