"""`optimize --selector`: the configs the search times first come from a selector fitted on stored tuning rows
(a real SQLite file; nothing is timed). The stored rows say a config two moves from the tiled matmul's default
wins near both benchmark shapes, so the advice puts it first and the provider proposes it first (the plain climb
never does)."""

from __future__ import annotations

from pathlib import Path

from conftest import EXAMPLES

from kernel_agent.core.config import SelectorChoice
from kernel_agent.core.tuning import TIMED, ConfigTime, Stage
from kernel_agent.db.session import open_database
from kernel_agent.db.tuning import TuningStore, VariantKey
from kernel_agent.db.writes import problem_hash, sha256
from kernel_agent.measure.ceilings import fingerprint_key
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import ProposalContext
from kernel_agent.propose.search import SearchProvider
from kernel_agent.propose.tunables import read_config
from kernel_agent.select.advice import advise
from kernel_agent.tune.space import configs

PROBLEM = EXAMPLES / "tuning" / "cpp_tiled_matmul"  # benchmark shapes (256, 256, 256) and (8, 512, 512)
NEAR, FAR = [(250, 250, 250), (8, 500, 500)], [(4000, 4, 4)]
WINNER = {"TILE_M": 128, "TILE_N": 512, "TILE_K": 256, "ORDER": 1}
ELSEWHERE = {"TILE_M": 4, "TILE_N": 32, "TILE_K": 256, "ORDER": 0}


def stored_db(tmp_path: Path):  # noqa: ANN201
    problem = load_problem(PROBLEM)
    db = open_database(str(tmp_path / "runs.db"))
    key = VariantKey(
        problem.name, problem_hash(problem), sha256(problem.baseline_source), fingerprint_key("cpu", 1), "float32"
    )
    rows = []
    for shape in NEAR + FAR:
        wanted = WINNER if shape in NEAR else ELSEWHERE
        for config in configs(problem):
            ms = 1.0 if config == wanted else 3.0
            rows.append(ConfigTime(shape, "float32", config, Stage.SCREEN, TIMED, ms, (ms, ms)))
    TuningStore(db, key).put(rows)
    return db, problem


def test_the_nearest_tuned_shape_orders_the_search(tmp_path: Path) -> None:
    db, problem = stored_db(tmp_path)
    advice = advise(db, problem, "cpu", 1, SelectorChoice.AUTO)
    assert advice.configs[0] == WINNER, advice
    assert advice.decision == [WINNER]  # best at two of the three nearest tuned shapes: confident
    assert "nearest selector" in advice.note and "3 shape(s)" in advice.note and "1 of them its decision" in advice.note
    context = ProposalContext(problem, problem.baseline_source, [], [], {}, 1, 4, "cpu")
    names = list(problem.tunables)
    advised = [read_config(p.source, names) for p in SearchProvider(first=advice.configs).propose(context).proposals]
    plain = [read_config(p.source, names) for p in SearchProvider().propose(context).proposals]
    assert advised[0] == WINNER and WINNER not in plain


def test_no_rows_or_none_means_the_plain_search(tmp_path: Path) -> None:
    db, problem = stored_db(tmp_path)
    assert advise(db, problem, "cpu", 1, SelectorChoice.NONE).configs == []
    other = advise(db, problem, "cpu", 2, SelectorChoice.AUTO)  # tuned with 1 thread: another fingerprint
    assert other.configs == [] and other.note == ""
    named = advise(db, problem, "cpu", 2, SelectorChoice.NEAREST)
    assert named.configs == [] and "no tuning rows" in named.note and "kernel-agent tune" in named.note


def test_optimize_gives_each_kernel_its_own_advised_search(tmp_path: Path) -> None:
    """The wiring `optimize` uses (optimize/providers.build_providers), for the run's threads and selector."""
    from kernel_agent.core.config import EvalConfig
    from kernel_agent.optimize.config import KernelSpec, RunPlan, SearchConfig
    from kernel_agent.optimize.providers import build_providers

    db, problem = stored_db(tmp_path)
    spec = KernelSpec(str(PROBLEM))
    plan = RunPlan(kernels=[spec], evaluation=EvalConfig(threads=1))
    assert build_providers(db, plan, [(spec, problem)], [problem.name])[problem.name].first[0] == WINNER
    plan.search = SearchConfig(trust_selector=True)
    trusting = build_providers(db, plan, [(spec, problem)], [problem.name])[problem.name]
    assert trusting.first == [WINNER] and trusting.only_first
    plan.search = SearchConfig(selector=SelectorChoice.NONE, trust_selector=True)  # no advice: nothing to trust
    plain = build_providers(db, plan, [(spec, problem)], [problem.name])[problem.name]
    assert plain.first == [] and not plain.only_first
