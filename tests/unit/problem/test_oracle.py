"""The check plan and the trusted inputs and references it draws."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import torch
from conftest import SOFTMAX

from kernel_agent.problem.load import Problem, load_problem
from kernel_agent.problem.oracle import CaseMaker, check_plan


def plan_problem(**changes: object) -> Problem:
    base = Problem(
        name="p",
        kind="native",
        path=Path("p"),
        module_path=Path("p/problem.py"),
        baseline_path=Path("p/kernel.py"),
        device="cpu",
        shapes=[(256, 2048)],
        check_shapes=[(1, 1), (3, 17)],
        dtypes=["float32"],
        tolerances={},
        norm_tolerances={},
    )
    return replace(base, **changes)


def test_check_shapes_get_every_seed_and_benchmark_shapes_fewer() -> None:
    plan = check_plan(plan_problem(dtypes=["float32", "bfloat16"]), seeds_per_shape=5, bench_seeds=2)
    counts = Counter((case.dtype, case.shape) for case in plan)
    assert counts == {
        (d, s): n for d in ("float32", "bfloat16") for s, n in (((1, 1), 5), ((3, 17), 5), ((256, 2048), 2))
    }
    assert [case.shape for case in plan[:12]] == [(1, 1)] * 5 + [(3, 17)] * 5 + [
        (256, 2048)
    ] * 2  # cheap failures first
    assert len({case.seed for case in plan}) == len(plan)  # a fresh secret seed for every case


def test_each_shape_sees_every_distribution_in_turn() -> None:
    plan = check_plan(plan_problem(distributions=["normal", "uniform"]), seeds_per_shape=3, bench_seeds=1)
    by_shape: dict[tuple, list[str]] = {}
    for case in plan:
        by_shape.setdefault(case.shape, []).append(case.distribution)
    assert by_shape == {
        (1, 1): ["normal", "uniform", "normal"],
        (3, 17): ["normal", "uniform", "normal"],
        (256, 2048): ["normal", "uniform"],
    }


def test_a_problem_without_check_shapes_checks_its_benchmark_shapes_fully() -> None:
    """Otherwise the only cases would be the two benchmark seeds."""
    plan = check_plan(plan_problem(check_shapes=[]), seeds_per_shape=5, bench_seeds=2)
    assert [case.shape for case in plan] == [(256, 2048)] * 5
    assert plan[0].label() == "shape=[256, 2048] dtype=float32 inputs=normal"


def test_inputs_follow_the_seed_and_the_distribution() -> None:
    maker = CaseMaker(load_problem(SOFTMAX), "cpu")
    first, again, other = (maker.inputs((3, 17), "float32", "normal", seed) for seed in (7, 7, 8))
    assert torch.equal(first[0], again[0]) and not torch.equal(first[0], other[0])
    (uniform,) = maker.inputs((3, 17), "float32", "uniform", 7)
    assert uniform.min() >= 0 and uniform.max() < 1 and (first[0] < 0).any()


def test_references_are_a_float64_gold_and_a_same_dtype_base() -> None:
    maker = CaseMaker(load_problem(SOFTMAX), "cpu")
    inputs = maker.inputs((3, 17), "float32", "normal", 1)
    (gold,), (base,) = maker.reference(inputs)
    assert gold.dtype == torch.float64 and base.dtype == torch.float32
    assert torch.allclose(gold, torch.softmax(inputs[0].double(), -1)) and torch.equal(
        base, torch.softmax(inputs[0], -1)
    )
    (meta,) = maker.reference_meta(inputs)
    assert meta.device.type == "meta" and meta.shape == (3, 17)
