"""The offline `search` provider: a small local autotuner over a problem's TUNABLES.

It needs no model and no network: every candidate is the best parent's source
with some tunable values changed (see kernel_agent.propose.tunables), and the usual
evaluation path verifies and times it like any other candidate.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from kernel_agent.core.verdict import PASSING, STATUSES
from kernel_agent.propose.base import Attempt, Proposal, ProposalBatch, ProposalContext
from kernel_agent.propose.tunables import TunableError, Value, apply_config, config_note, read_config

FULL_GRID_LIMIT = 4096  # grids up to this size are enumerated and ranked whole
NOISE = 0.01  # speedups within 1% of each other count as neither better nor worse
MEASURED = ("faster", "correct")  # statuses whose speedup is trusted as a signal ("flagged" is not)
FAILED = tuple(s for s in STATUSES if s not in PASSING)

Config = tuple[Value, ...]  # values in the order of problem.tunables
Point = tuple[int, ...]  # indices into each tunable's declared list
Outcome = float | None  # a trusted speedup, or None for a failed candidate
Votes = dict[tuple[int, int], int]  # (tunable index, direction +1/-1) -> net evidence


class SearchProvider:
    """Hill-climbing over the declared grid, starting from the best parent's config.

    Order of proposals, per round:
    1. single moves: one tunable one step up or down its declared list;
    2. two-step moves of one tunable, and one-step moves of two tunables at once;
    3. the rest of the grid by distance (grids up to FULL_GRID_LIMIT), or, for larger
       grids, any move of one tunable and then a plain scan so nothing is unreachable.
    Configs already tried (any history source, failed ones included) are skipped.

    Pruning by measurement: every pair of measured configs that differ in one tunable
    votes on that tunable's direction (+1 if the move gained more than NOISE, -1 if it
    lost or the moved-to config failed). Within a tier, moves along directions with
    positive votes come first and moves along negative ones come last. As the best
    parent moves, the neighbourhood moves with it, so this is a greedy hill climb.
    Deterministic: no randomness, ties broken by the index tuple.
    """

    name = "search"
    reads_profile = (
        False  # it times tunables; the operator breakdown would cost a second per accepted candidate for nothing
    )

    def __init__(self, first: Iterable[dict[str, Value]] = (), only_first: bool = False) -> None:
        # Configs to time before the hill climb, best first: a selector's picks for the problem's benchmark
        # shapes (kernel_agent.select.prior.search_order). Off-grid or unknown names are dropped.
        # only_first: time those and stop, no climb (a trusted selector's decision, select.prior.decision).
        self.first = list(first)
        self.only_first = only_first

    def propose(self, context: ProposalContext) -> ProposalBatch:
        space = _Space.of(context.problem.tunables)
        if not space.names:
            return ProposalBatch(exhausted=True)
        start_source, start = _starting_point(context, space.names)
        outcomes = _outcomes(context, space.names)
        tried = {start, *outcomes, *_readable_configs((p.source for p in context.parents), space.names)}
        votes = _direction_votes(outcomes, space)
        prior = [space.snap(c) for c in _prior_configs(self.first, space)]
        climb = [] if self.only_first else _ordered_points(space, space.snap(start), votes)
        ranked = _untried(itertools.chain(prior, climb), space, tried)
        chosen = list(itertools.islice(ranked, max(context.samples, 0)))
        exhausted = not chosen and next(ranked, None) is None
        return ProposalBatch(proposals=[_proposal(start_source, space.named(c)) for c in chosen], exhausted=exhausted)


@dataclass(frozen=True)
class _Space:
    """The declared grid: tunable names and each one's list of allowed values."""

    names: list[str]
    values: list[list[Value]]

    @classmethod
    def of(cls, tunables: dict[str, list[Value]]) -> _Space:
        return cls(list(tunables), [list(dict.fromkeys(v)) for v in tunables.values()])

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.values)

    def config(self, point: Point) -> Config:
        return tuple(values[i] for values, i in zip(self.values, point, strict=True))

    def named(self, config: Config) -> dict[str, Value]:
        return dict(zip(self.names, config, strict=True))

    def snap(self, config: Config) -> Point:
        """The grid point of a config; an off-grid value maps to its nearest declared one."""
        return tuple(_nearest_index(values, v) for values, v in zip(self.values, config, strict=True))

    def contains(self, point: Point) -> bool:
        return all(0 <= i < len(values) for values, i in zip(self.values, point, strict=True))


def _prior_configs(first: list[dict[str, Value]], space: _Space) -> Iterator[Config]:
    """The given configs that name every tunable with a declared value, as grid configs."""
    for config in first:
        if set(config) == set(space.names) and all(config[n] in v for n, v in zip(space.names, space.values)):
            yield tuple(config[name] for name in space.names)


def _nearest_index(values: list[Value], value: Value) -> int:
    if value in values:
        return values.index(value)
    if _is_number(value) and all(_is_number(v) for v in values):
        return min(range(len(values)), key=lambda i: abs(values[i] - value))
    return 0


def _is_number(value: Value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _starting_point(context: ProposalContext, names: list[str]) -> tuple[str, Config]:
    """The best parent whose tunables can be read (an LLM may have rewritten them), else the baseline."""
    for parent in context.parents:
        try:
            return parent.source, _read(parent.source, names)
        except TunableError:
            continue
    return context.baseline_source, _read(context.baseline_source, names)


def _read(source: str, names: list[str]) -> Config:
    config = read_config(source, names)
    return tuple(config[name] for name in names)


def _readable_configs(sources: Iterable[str], names: list[str]) -> Iterator[Config]:
    for source in sources:
        try:
            yield _read(source, names)
        except TunableError:
            continue


def _outcomes(context: ProposalContext, names: list[str]) -> dict[Config, Outcome | str]:
    """Every tried config with what it showed: a speedup, None (failed), or "unknown" (no signal)."""
    outcomes: dict[Config, Outcome | str] = {}
    try:
        outcomes[_read(context.baseline_source, names)] = 1.0
    except TunableError:
        pass
    for attempt in context.history:  # oldest first: a re-measured config keeps its latest outcome
        for config in _readable_configs([attempt.source], names):
            outcomes[config] = _outcome(attempt)
    return outcomes


def _outcome(attempt: Attempt) -> Outcome | str:
    if attempt.status in MEASURED and attempt.speedup is not None:
        return float(attempt.speedup)
    return None if attempt.status in FAILED else "unknown"


def _direction_votes(outcomes: dict[Config, Outcome | str], space: _Space) -> Votes:
    """Net evidence per (tunable, direction) from measured configs that differ in that tunable only."""
    votes: Votes = defaultdict(int)
    points = [(space.snap(config), outcome) for config, outcome in outcomes.items() if outcome != "unknown"]
    for dim in range(len(space.names)):
        buckets: dict[Point, list[tuple[Point, Outcome | str]]] = defaultdict(list)
        for point, outcome in points:
            buckets[point[:dim] + point[dim + 1 :]].append((point, outcome))
        for group in buckets.values():
            for (a, from_outcome), (b, to_outcome) in itertools.permutations(group, 2):
                if isinstance(from_outcome, float) and a[dim] != b[dim]:
                    votes[(dim, _sign(b[dim] - a[dim]))] += _compare(from_outcome, to_outcome)
    return votes


def _compare(before: float, after: Outcome | str) -> int:
    if not isinstance(after, float):
        return -1  # the move led to a failure
    if after > before * (1 + NOISE):
        return 1
    return -1 if after < before * (1 - NOISE) else 0


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _rank(point: Point, origin: Point, votes: Votes) -> tuple[int, bool, int, int, Point]:
    """Sort key: nearness tier first, then measured direction evidence, then distance."""
    deltas = [p - o for p, o in zip(point, origin, strict=True)]
    changed = sum(1 for d in deltas if d)
    step = max((abs(d) for d in deltas), default=0)
    if changed <= 1 and step <= 1:
        tier = 0
    elif (changed, step) in ((1, 2), (2, 1)):
        tier = 1
    else:
        tier = 2
    score = sum(votes.get((dim, _sign(d)), 0) for dim, d in enumerate(deltas) if d)
    return tier, score < 0, -score, sum(abs(d) for d in deltas), point


def _ordered_points(space: _Space, origin: Point, votes: Votes) -> Iterator[Point]:
    """Grid points in proposal order (may repeat; the caller drops repeats and tried ones)."""

    def key(point: Point) -> tuple[int, bool, int, int, Point]:
        return _rank(point, origin, votes)

    every = itertools.product(*(range(len(v)) for v in space.values))
    if space.size <= FULL_GRID_LIMIT:
        yield from sorted(every, key=key)
        return
    yield from sorted(_near_points(space, origin), key=key)
    yield from sorted(_axis_points(space, origin), key=key)
    yield from every  # a plain scan: slow to reach, but no config is left out


def _near_points(space: _Space, origin: Point) -> Iterator[Point]:
    """Tiers 0 and 1 around origin: one tunable by up to two steps, or two tunables by one step."""
    dims = range(len(origin))
    moves = [{dim: d} for dim in dims for d in (-2, -1, 1, 2)]
    moves += [{i: di, j: dj} for i, j in itertools.combinations(dims, 2) for di in (-1, 1) for dj in (-1, 1)]
    yield origin
    for move in moves:
        point = tuple(o + move.get(dim, 0) for dim, o in enumerate(origin))
        if space.contains(point):
            yield point


def _axis_points(space: _Space, origin: Point) -> Iterator[Point]:
    """Every value of one tunable with the others held at origin."""
    for dim, values in enumerate(space.values):
        for index in range(len(values)):
            yield origin[:dim] + (index,) + origin[dim + 1 :]


def _untried(points: Iterable[Point], space: _Space, tried: set[Config]) -> Iterator[Config]:
    seen = set(tried)
    for point in points:
        config = space.config(point)
        if config not in seen:
            seen.add(config)
            yield config


def _proposal(start_source: str, config: dict[str, Value]) -> Proposal:
    return Proposal(source=apply_config(start_source, config), origin="search", note=config_note(config))
