"""The two-stage plan and how a verdict becomes rows, without a sandbox (the sandboxed path: tests/e2e/test_tune.py)."""

from __future__ import annotations

import pytest
from conftest import shape_timing, timing_record

from kernel_agent.core.tuning import TIMED, ConfigTime, Stage, config_key
from kernel_agent.core.verdict import Verdict
from kernel_agent.tune.ground_truth import TunePlan, confirm_plan, rows_of


def screened(shape, tile, ms) -> ConfigTime:  # noqa: ANN001
    return ConfigTime(shape, "float32", {"TILE": tile}, Stage.SCREEN, TIMED, ms)


def test_stage_two_takes_the_top_configs_of_each_shape_and_the_default() -> None:
    rows = [screened((8,), 4, 3.0), screened((8,), 16, 1.0), screened((8,), 64, 2.0), screened((64,), 64, 1.0)]
    rows.append(ConfigTime((64,), "float32", {"TILE": 16}, Stage.SCREEN, "incorrect"))
    done = {(r.shape, config_key(r.config), r.stage): r for r in rows}
    plan = confirm_plan(done, TunePlan([(8,), (64,)], "float32", top=1), {"TILE": 4})
    assert plan == {
        config_key({"TILE": 16}): [(8,)],
        config_key({"TILE": 4}): [(8,), (64,)],
        config_key({"TILE": 64}): [(64,)],
    }


def test_a_timed_verdict_gives_one_row_per_shape_with_its_interval() -> None:
    timing = timing_record(per_shape=[shape_timing((8,), base_ms=2.0, cand_ms=1.0, speedup_ci=(1.6, 2.5))])
    verdict = Verdict(status="faster", correct=True, timing=timing)
    (row,) = rows_of(verdict, {"TILE": 4}, [(8,)], "float32", Stage.SCREEN)
    assert row.timed and row.time_ms == 1.0 and row.speedup == 2.0 and row.baseline_ms == 2.0
    assert row.ci_ms == pytest.approx((0.8, 1.25))


def test_a_failed_verdict_is_stored_for_every_shape_with_its_reason() -> None:
    verdict = Verdict(status="incorrect", reason="[8] float32: mismatch at 3")
    rows = rows_of(verdict, {"TILE": 4}, [(8,), (64,)], "float32", Stage.SCREEN)
    assert [(r.shape, r.status, r.reason, r.time_ms) for r in rows] == [
        ((8,), "incorrect", "[8] float32: mismatch at 3", None),
        ((64,), "incorrect", "[8] float32: mismatch at 3", None),
    ]


def test_shapes_are_split_into_groups_of_the_given_size() -> None:
    from kernel_agent.tune.ground_truth import _groups

    shapes = [(1,), (2,), (3,), (4,), (5,)]
    assert _groups(shapes, 0) == [shapes]
    assert _groups(shapes, 2) == [[(1,), (2,)], [(3,), (4,)], [(5,)]]
    assert _groups([], 2) == []
