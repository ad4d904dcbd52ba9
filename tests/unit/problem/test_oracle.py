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
        (d, s): n for d in ("float32", "bfloat16") for s, n in (((1, 1), 7), ((3, 17), 7), ((256, 2048), 2))
    }  # each check shape: its seeds and the two hard draws
    assert [case.shape for case in plan[:16]] == [(1, 1)] * 7 + [(3, 17)] * 7 + [
        (256, 2048)
    ] * 2  # cheap failures first
    assert len({case.seed for case in plan}) == len(plan)  # a fresh secret seed for every case


def test_each_shape_sees_every_distribution_in_turn() -> None:
    plan = check_plan(plan_problem(distributions=["normal", "uniform"]), seeds_per_shape=3, bench_seeds=1)
    by_shape: dict[tuple, list[str]] = {}
    for case in plan:
        by_shape.setdefault(case.shape, []).append(case.distribution)
    assert by_shape == {
        (1, 1): ["normal", "uniform", "normal", "large", "offset"],
        (3, 17): ["normal", "uniform", "normal", "large", "offset"],
        (256, 2048): ["normal", "uniform"],
    }


def test_a_problem_without_check_shapes_checks_its_benchmark_shapes_fully() -> None:
    """Otherwise the only cases would be the two benchmark seeds."""
    plan = check_plan(plan_problem(check_shapes=[]), seeds_per_shape=5, bench_seeds=2)
    assert [case.shape for case in plan] == [(256, 2048)] * 7
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


# --- the hard draws: the problem's own inputs moved to where formulas break ------------------------------------


def _maker() -> CaseMaker:
    return CaseMaker(load_problem(SOFTMAX), "cpu")


def test_the_large_draw_overflows_an_unshifted_softmax_and_not_the_reference() -> None:
    from kernel_agent.problem.oracle import LARGE_PAST_EXP

    (x,) = _maker().inputs((37, 130), "float32", "large", 11)
    assert abs(float(x.abs().max()) - LARGE_PAST_EXP * 88.72) < 0.1  # past exp's float32 range, not far past
    naive = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)
    assert not torch.isfinite(naive).all() and torch.isfinite(torch.softmax(x, -1)).all()


def test_the_offset_draw_makes_e_x2_minus_e_x_squared_cancel_and_not_a_two_pass_variance() -> None:
    (x,) = _maker().inputs((37, 130), "float32", "offset", 12)
    gold = torch.var(x.double(), -1, unbiased=False)
    naive = (x * x).mean(-1) - x.mean(-1) ** 2
    d = x - x.mean(-1, keepdim=True)
    two_pass = (d * d).mean(-1)
    assert float(((naive.double() - gold).abs() / gold).max()) > 1e-3  # well past float32's rtol 1e-4
    assert float(((two_pass.double() - gold).abs() / gold).max()) < 1e-5


def test_hard_draws_leave_integers_and_masks_alone_and_differ_by_seed() -> None:
    from kernel_agent.problem.oracle import hardened

    mask = torch.tensor([0.0, 1.0, 1.0, 0.0])
    index = torch.arange(5)
    assert torch.equal(hardened(mask, "large", 1e-4), mask) and torch.equal(hardened(index, "offset", 1e-4), index)
    assert torch.equal(hardened(torch.zeros(3), "large", 1e-4), torch.zeros(3))
    maker = _maker()
    first, second = maker.inputs((3, 17), "float32", "large", 1)[0], maker.inputs((3, 17), "float32", "large", 2)[0]
    assert not torch.equal(first, second)


def test_a_hard_case_names_what_it_did_in_its_label() -> None:
    plan = check_plan(plan_problem(), seeds_per_shape=2)
    labels = [case.label() for case in plan if case.hard]
    assert len(labels) == 4 and "inputs=large (scaled to the edge of exp's range" in labels[0]
    assert "inputs=offset (shifted far from zero" in labels[1]
