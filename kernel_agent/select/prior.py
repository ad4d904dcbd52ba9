"""A selector's advice to the search provider: which configs to time first for a problem's benchmark shapes,
so the search reaches its best with fewer timed candidates."""

from __future__ import annotations

from kernel_agent.core.tuning import Config, Shape, config_key, parse_config
from kernel_agent.select import abstain
from kernel_agent.select.abstain import Abstaining
from kernel_agent.select.base import Selector


def search_order(selector: Selector, shapes: list[Shape], limit: int | None = None) -> list[Config]:
    """The pool by the mean of its predicted rank over `shapes` (a fitted selector), best first; each shape's
    own pick comes before any config picked for no shape."""
    rank: dict[str, float] = {}
    picks: list[str] = []
    for shape in shapes:
        ranking = selector.rank(shape)
        if ranking and ranking[0][0] not in picks:
            picks.append(ranking[0][0])
        for position, (key, _) in enumerate(ranking):
            rank[key] = rank.get(key, 0.0) + position / len(shapes)
    rest = sorted((k for k in rank if k not in picks), key=lambda k: (rank[k], k))
    ordered = sorted(picks, key=lambda k: (rank[k], k)) + rest
    return [parse_config(k) for k in ordered[:limit]]


def decision(selector: Selector, shapes: list[Shape], k: int = abstain.K, below: float = abstain.BELOW) -> list[Config]:
    """What trusting the selector times, in `search_order`: each shape's confident pick, or its top k where the
    selector is unsure (the abstain rule). A search that stops after these times a handful, not the climb."""
    rule = Abstaining(selector, k, below)
    wanted: set[str] = set()
    for shape in shapes:
        pick = selector.select(shape)
        wanted.update(rule.to_time(pick) or [pick.config])
    return [config for config in search_order(selector, shapes) if config_key(config) in wanted]
