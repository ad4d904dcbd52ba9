"""The offline search provider: neighbours of the best config first, never a config twice (no evaluation runs)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

import pytest
from conftest import EXAMPLES

from kernel_agent.problem.load import Problem, load_problem
from kernel_agent.propose.base import Attempt, ProposalBatch, ProposalContext
from kernel_agent.propose.search import SearchProvider
from kernel_agent.propose.tunables import apply_config, config_note, read_config
from unit.propose.test_tunables import changed_lines

GRID = {"BLOCK_SIZE": [64, 128, 256, 512, 1024], "NUM_WARPS": [1, 2, 4, 8]}


def make_problem(tmp_path: Path, tunables: dict[str, list], kernel: str) -> Problem:
    folder = tmp_path / "problem"
    folder.mkdir()
    (folder / "problem.py").write_text(
        f"SHAPES = [(8,)]\nTUNABLES = {tunables!r}\n\ndef reference(x):\n    return x\n\n\n"
        "def make_inputs(shape, dtype, device, generator):\n    return ()\n"
    )
    (folder / "kernel.py").write_text(kernel)
    return load_problem(folder)


def toy_kernel(config: dict) -> str:
    assigns = "".join(f"{name} = {value!r}\n" for name, value in config.items())
    return f'"""Toy."""\n\n{assigns}\n\ndef kernel(x):\n    return x\n'


@pytest.fixture
def problem(tmp_path: Path) -> Problem:
    return make_problem(tmp_path, GRID, toy_kernel({"BLOCK_SIZE": 128, "NUM_WARPS": 2}))


def context(
    problem: Problem, history: Sequence[Attempt] = (), parents: Sequence[Attempt] = (), samples: int = 4, round: int = 1
) -> ProposalContext:
    return ProposalContext(
        problem=problem,
        baseline_source=problem.baseline_source,
        parents=list(parents),
        history=list(history),
        profile={},
        round=round,
        samples=samples,
        device="cpu",
    )


def attempt(problem: Problem, config: dict, status: str, speedup: float | None) -> Attempt:
    source = apply_config(problem.baseline_source, config)
    return Attempt(
        candidate_id=None, source=source, status=status, reason="", speedup=speedup, note=config_note(config)
    )


def configs_of(batch: ProposalBatch, problem: Problem) -> list[tuple]:
    names = list(problem.tunables)
    return [tuple(read_config(p.source, names).values()) for p in batch.proposals]


def test_no_tunables_is_an_empty_exhausted_batch(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, {}, toy_kernel({}))
    batch = SearchProvider().propose(context(problem))
    assert batch.proposals == [] and batch.exhausted


def test_first_round_proposes_the_distinct_single_step_neighbours(problem: Problem) -> None:
    batch = SearchProvider().propose(context(problem, samples=10))
    configs = configs_of(batch, problem)
    assert set(configs[:4]) == {(64, 2), (256, 2), (128, 1), (128, 4)}
    assert len(configs) == len(set(configs)) == 10 and (128, 2) not in configs
    assert set(configs[4:]) == {
        (512, 2),
        (128, 8),
        (64, 1),
        (64, 4),
        (256, 1),
        (256, 4),
    }  # two-step and pairwise moves next
    for proposal, config in zip(batch.proposals, configs, strict=True):
        assert proposal.origin == "search" and proposal.note == config_note(
            dict(zip(problem.tunables, config, strict=True))
        )
        assert len(changed_lines(problem.baseline_source, proposal.source)) == sum(
            a != b for a, b in zip(config, (128, 2), strict=True)
        )
    assert not batch.exhausted
    assert configs_of(SearchProvider().propose(context(problem, samples=10)), problem) == configs  # deterministic


def test_never_repeats_a_config_from_history(problem: Problem) -> None:
    history = [
        attempt(problem, {"BLOCK_SIZE": 64, "NUM_WARPS": 2}, "compile_error", None),
        attempt(problem, {"BLOCK_SIZE": 128, "NUM_WARPS": 4}, "correct", 0.9),
        attempt(problem, {"BLOCK_SIZE": 512, "NUM_WARPS": 2}, "flagged", 1.3),
        Attempt(candidate_id=None, source="not python (", status="unparseable", reason="", speedup=None),
    ]
    configs = configs_of(SearchProvider().propose(context(problem, history=history, samples=30)), problem)
    assert len(configs) == len(set(configs)) == 20 - 1 - 3  # the whole grid less baseline and history
    assert not {(64, 2), (128, 4), (512, 2), (128, 2)} & set(configs)


def test_prefers_the_improving_direction_and_defers_failed_ones(problem: Problem) -> None:
    # Without evidence the order is the index order: (256, 1), (256, 4), (512, 2).
    raised = attempt(problem, {"BLOCK_SIZE": 256, "NUM_WARPS": 2}, "faster", 1.5)
    history = [raised, attempt(problem, {"BLOCK_SIZE": 128, "NUM_WARPS": 1}, "runtime_error", None)]
    configs = configs_of(
        SearchProvider().propose(context(problem, history=history, parents=[raised], samples=3)), problem
    )
    assert configs == [(512, 2), (256, 4), (256, 1)]  # raise the block further first, lower the warps (failed) last


def test_defers_a_direction_that_got_slower(problem: Problem) -> None:
    # Without evidence the order is (64, 2), (128, 4), (256, 2).
    history = [attempt(problem, {"BLOCK_SIZE": 128, "NUM_WARPS": 1}, "correct", 0.8)]
    configs = configs_of(SearchProvider().propose(context(problem, history=history, samples=3)), problem)
    assert configs == [(128, 4), (64, 2), (256, 2)]


def test_noise_is_not_evidence(problem: Problem) -> None:
    history = [attempt(problem, {"BLOCK_SIZE": 128, "NUM_WARPS": 1}, "correct", 0.995)]
    configs = configs_of(SearchProvider().propose(context(problem, history=history, samples=3)), problem)
    assert configs == [(64, 2), (128, 4), (256, 2)]


def test_starts_from_the_best_parent(problem: Problem) -> None:
    parent = attempt(problem, {"BLOCK_SIZE": 1024, "NUM_WARPS": 8}, "faster", 2.0)
    configs = configs_of(
        SearchProvider().propose(context(problem, history=[parent], parents=[parent], samples=2)), problem
    )
    assert set(configs) == {(512, 8), (1024, 4)}


def test_tiny_grid_is_exhausted_after_every_config_was_tried(tmp_path: Path) -> None:
    problem = make_problem(tmp_path, {"A": [1, 2, 3], "B": [True, False]}, toy_kernel({"A": 1, "B": True}))
    history: list[Attempt] = []
    for round_ in range(1, 10):
        batch = SearchProvider().propose(context(problem, history=history, samples=2, round=round_))
        if batch.exhausted:
            break
        assert batch.proposals
        for p in batch.proposals:
            history.append(
                Attempt(candidate_id=None, source=p.source, status="correct", speedup=1.0, reason="", round=round_)
            )
    assert batch.exhausted and batch.proposals == []
    seen = [tuple(read_config(a.source, ["A", "B"]).values()) for a in history]
    assert len(seen) == len(set(seen)) == 5 and (1, True) not in seen


def test_hill_climb_finds_the_peak_before_scanning_the_grid(tmp_path: Path) -> None:
    grid = {"X": list(range(10)), "Y": list(range(10))}
    problem = make_problem(tmp_path, grid, toy_kernel({"X": 0, "Y": 0}))
    peak = (7, 6)

    def speedup(c: tuple) -> float:
        return 1.0 + 10 - abs(c[0] - peak[0]) - abs(c[1] - peak[1])

    history: list[Attempt] = []
    for round_ in range(1, 30):
        best = max(history, key=lambda a: a.speedup or 0, default=None)
        batch = SearchProvider().propose(
            context(problem, history=history, parents=[best] if best else [], samples=2, round=round_)
        )
        for p in batch.proposals:
            config = tuple(read_config(p.source, ["X", "Y"]).values())
            history.append(
                Attempt(candidate_id=None, source=p.source, status="faster", speedup=speedup(config), reason="")
            )
        if any(tuple(read_config(a.source, ["X", "Y"]).values()) == peak for a in history):
            break
    assert len(history) <= 40, f"took {len(history)} evaluations to reach the peak of a 100-point grid"
    assert any(tuple(read_config(a.source, ["X", "Y"]).values()) == peak for a in history)


def test_large_grid_uses_the_neighbourhood(tmp_path: Path) -> None:
    grid = {f"T{i}": list(range(6)) for i in range(5)}  # 7776 configs: not enumerated
    problem = make_problem(tmp_path, grid, toy_kernel(dict.fromkeys(grid, 2)))
    configs = configs_of(SearchProvider().propose(context(problem, samples=10)), problem)
    assert len(set(configs)) == 10
    assert all(sum(abs(v - 2) for v in c) == 1 for c in configs)


def test_cpp_example_proposals_edit_the_define(tmp_path: Path) -> None:
    problem = load_problem(EXAMPLES / "cpp_softmax")
    batch = SearchProvider().propose(context(problem, samples=2))
    diffs = [
        list(difflib.unified_diff(problem.baseline_source.splitlines(), p.source.splitlines(), lineterm="", n=0))[3:]
        for p in batch.proposals
    ]
    assert sorted(diffs) == sorted([["-THREADS = 1", "+THREADS = 2"], ["-#define ROW_BLOCK 1", "+#define ROW_BLOCK 4"]])


def test_large_grid_path_still_reaches_every_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kernel_agent.propose.search.FULL_GRID_LIMIT", 1)  # take the neighbourhood-then-scan path
    problem = make_problem(tmp_path, {"A": [1, 2, 3, 4], "B": ["x", "y", "z"]}, toy_kernel({"A": 1, "B": "x"}))
    history: list[Attempt] = []
    batch = ProposalBatch()
    for round_ in range(1, 20):
        batch = SearchProvider().propose(context(problem, history=history, samples=3, round=round_))
        if batch.exhausted:
            break
        history += [
            Attempt(candidate_id=None, source=p.source, status="incorrect", speedup=None, reason="")
            for p in batch.proposals
        ]
    seen = [tuple(read_config(a.source, ["A", "B"]).values()) for a in history]
    assert batch.exhausted and len(seen) == len(set(seen)) == 11
