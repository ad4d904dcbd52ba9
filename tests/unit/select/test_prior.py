"""The search provider times a selector's picks first, then climbs as before."""

from __future__ import annotations

from conftest import EXAMPLES

from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import ProposalContext
from kernel_agent.propose.search import SearchProvider
from kernel_agent.propose.tunables import read_config
from kernel_agent.select.nearest import NearestShape
from kernel_agent.select.prior import search_order

from .test_score import CONTEXT, TRAIN, table


def context(problem, samples: int) -> ProposalContext:  # noqa: ANN001
    return ProposalContext(problem, problem.baseline_source, [], [], {}, 1, samples, "cpu")


def test_search_order_puts_each_shapes_pick_first() -> None:
    selector = NearestShape()
    selector.fit(table().subset(TRAIN), CONTEXT)
    order = search_order(selector, [(300, 9), (5, 100)])
    assert order[:2] == [{"TILE": 4}, {"TILE": 256}] or order[:2] == [{"TILE": 256}, {"TILE": 4}]
    assert len(order) == 4


def test_the_search_provider_proposes_the_prior_configs_first() -> None:
    problem = load_problem(EXAMPLES / "tuning" / "cpp_tiled_matmul")
    names = list(problem.tunables)
    far = {"TILE_M": 128, "TILE_N": 32, "TILE_K": 256, "ORDER": 1}  # two steps from the default: not proposed early
    plain = SearchProvider().propose(context(problem, 2))
    assert far not in [read_config(p.source, names) for p in plain.proposals]
    advised = SearchProvider(first=[far, {"TILE_M": 7, "TILE_N": 32, "TILE_K": 256, "ORDER": 1}]).propose(
        context(problem, 2)
    )
    configs = [read_config(p.source, names) for p in advised.proposals]
    assert configs[0] == far  # the off-grid second one is dropped; the climb fills the batch
    assert configs[1] == read_config(plain.proposals[0].source, names)


def test_a_replayed_search_with_the_best_first_needs_one_candidate() -> None:
    from kernel_agent.select.replay import replay
    from kernel_agent.select.table import GroundTruth
    from kernel_agent.tune.records import TIMED, ConfigTime, Stage
    from kernel_agent.tune.space import configs

    problem = load_problem(EXAMPLES / "tuning" / "cpp_tiled_matmul")
    best = {"TILE_M": 128, "TILE_N": 512, "TILE_K": 256, "ORDER": 1}  # far from the default
    rows = [
        ConfigTime((64, 64, 64), "float32", c, Stage.SCREEN, TIMED, 1.0 if c == best else 2.0 + 0.01 * i)
        for i, c in enumerate(configs(problem))
    ]
    table = GroundTruth.from_rows(rows, read_config(problem.baseline_source, list(problem.tunables)))
    plain = replay(problem, table, [(64, 64, 64)], [])
    advised = replay(problem, table, [(64, 64, 64)], [best])
    assert advised.candidates == 1 and advised.reached == plain.reached == plain.best_speedup
    assert plain.candidates is not None and plain.candidates > 1
