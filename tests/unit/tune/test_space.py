"""The tuning families' declarations: disjoint shape sets, enough held-out shapes, every config writable."""

from __future__ import annotations

import math

import pytest
from conftest import EXAMPLES, FIXTURES

from kernel_agent.problem.load import load_problem
from kernel_agent.propose.tunables import apply_config, read_config
from kernel_agent.tune.space import SpaceError, chosen_shapes, configs, shape_sets

FAMILIES = sorted(p for p in (EXAMPLES / "tuning").iterdir() if (p / "problem.py").is_file())


def test_the_four_families_are_there() -> None:
    assert {p.name for p in FAMILIES} == {
        "cpp_tiled_matmul",
        "cpp_row_softmax",
        "triton_tiled_matmul",
        "triton_row_softmax",
    }


@pytest.mark.parametrize("folder", FAMILIES, ids=lambda p: p.name)
def test_family_declares_disjoint_sets_and_a_writable_space(folder) -> None:  # noqa: ANN001
    problem = load_problem(folder)
    sets = shape_sets(problem)
    assert len(sets.train) >= 8 and len(sets.heldout) >= 12
    assert not set(sets.train) & set(sets.heldout)
    sizes = sorted(math.prod(s) for s in sets.heldout)  # small to large: at least two orders of magnitude
    assert sizes[-1] >= 100 * sizes[0]
    assert any(max(s) >= 32 * min(s) for s in sets.heldout)  # skinny
    assert problem.module.COST_MODEL["kind"] in ("matmul", "rows")
    space = configs(problem)
    assert 16 <= len(space) <= 200  # a CPU family stays small: every config is one sandboxed evaluation
    default = read_config(problem.baseline_source, list(problem.tunables))
    assert default in space  # the shipped config is one of the pool
    for config in space:
        assert read_config(apply_config(problem.baseline_source, config), list(config)) == config


def test_shapes_from_the_command_line() -> None:
    problem = load_problem(FIXTURES / "tune_softmax")
    assert chosen_shapes(problem, "train") == [(64, 256)]
    assert chosen_shapes(problem, "all") == [(64, 256), (8, 1024)]
    assert chosen_shapes(problem, "[(4, 4), (4, 4), (2, 8)]") == [(4, 4), (2, 8)]
    assert chosen_shapes(problem, "(4, 4)") == [(4, 4)]
    with pytest.raises(SpaceError, match="not a shape of 2 positive integers"):
        chosen_shapes(problem, "[(4, 4, 4)]")
    with pytest.raises(SpaceError, match="not train, heldout, all or a list"):
        chosen_shapes(problem, "everything")
