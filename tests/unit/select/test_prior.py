"""The search provider times a selector's picks first, then climbs as before; trusting the selector, it times
only the selector's decision and stops."""

from __future__ import annotations

from conftest import EXAMPLES

from kernel_agent.core.tuning import TIMED, ConfigTime, Stage
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import ProposalContext
from kernel_agent.propose.search import SearchProvider
from kernel_agent.propose.tunables import read_config
from kernel_agent.select.nearest import NearestShape
from kernel_agent.select.prior import decision, search_order
from kernel_agent.select.replay import replay
from kernel_agent.select.table import GroundTruth
from kernel_agent.tune.space import configs

from .test_score import CONTEXT, TRAIN, Unsure, table

MATMUL = EXAMPLES / "tuning" / "cpp_tiled_matmul"
FAR_BEST = {"TILE_M": 128, "TILE_N": 512, "TILE_K": 256, "ORDER": 1}  # far from the default


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


def far_best_table(problem) -> GroundTruth:  # noqa: ANN001
    rows = [
        ConfigTime((64, 64, 64), "float32", c, Stage.SCREEN, TIMED, 1.0 if c == FAR_BEST else 2.0 + 0.01 * i)
        for i, c in enumerate(configs(problem))
    ]
    return GroundTruth.from_rows(rows, read_config(problem.baseline_source, list(problem.tunables)))


def test_a_replayed_search_with_the_best_first_needs_one_candidate() -> None:
    problem = load_problem(MATMUL)
    table = far_best_table(problem)
    plain = replay(problem, table, [(64, 64, 64)], [])
    advised = replay(problem, table, [(64, 64, 64)], [FAR_BEST])
    assert advised.candidates == 1 and advised.reached == plain.reached == plain.best_speedup
    assert plain.candidates is not None and plain.candidates > 1


class Sure(NearestShape):
    name = "sure"

    def confidence(self, shape, ranking) -> float:  # noqa: ANN001
        return 1.0


def test_a_confident_selector_decides_with_its_pick_an_unsure_one_with_its_top_k() -> None:
    sure, unsure = Sure(), Unsure()
    for selector in (sure, unsure):
        selector.fit(table().subset(TRAIN), CONTEXT)
    assert decision(sure, [(300, 9)]) == [{"TILE": 256}]
    assert decision(sure, [(300, 9), (5, 100)]) == search_order(sure, [(300, 9), (5, 100)])[:2]
    assert decision(unsure, [(300, 9)], k=2) == search_order(unsure, [(300, 9)])[:2]
    assert decision(unsure, [(300, 9)], k=3) == search_order(unsure, [(300, 9)])[:3]


def test_a_trusting_search_times_the_decision_and_stops() -> None:
    problem = load_problem(MATMUL)
    names = list(problem.tunables)
    trusting = SearchProvider(first=[FAR_BEST], only_first=True)
    first = trusting.propose(context(problem, 4))
    assert [read_config(p.source, names) for p in first.proposals] == [FAR_BEST]  # no climb fills the batch
    table = far_best_table(problem)
    trusted = replay(problem, table, [(64, 64, 64)], [FAR_BEST], only_first=True, rounds=3, patience=2)
    plain = replay(problem, table, [(64, 64, 64)], [], rounds=3, patience=2)
    assert (trusted.timed, trusted.candidates) == (1, 1) and trusted.reached == trusted.best_speedup
    assert plain.timed == 12 and plain.reached < plain.best_speedup  # three rounds of 4, the best never found
