"""A speedup against torch eager or torch.compile: the ratio of two speedups over one baseline, its interval
combined conservatively on the log scale."""

from __future__ import annotations

import math

import pytest

from kernel_agent.core.relative import Relative, over_baseline, point_relative, speedup_vs_json, versus


def test_the_ratio_and_its_interval_take_the_far_ends() -> None:
    relative = versus(Relative(2.0, (1.8, 2.2)), Relative(4.0, (3.6, 4.4)))
    assert relative.value == pytest.approx(0.5)
    assert relative.ci == pytest.approx((1.8 / 4.4, 2.2 / 3.6))


def test_log_half_widths_add_so_the_interval_is_no_narrower_than_quadrature() -> None:
    candidate, reference = Relative(1.5, (1.2, 1.9)), Relative(0.8, (0.7, 0.95))
    low, high = versus(candidate, reference).ci
    center = math.log(1.5 / 0.8)
    below = [math.log(1.5 / 1.2), math.log(0.95 / 0.8)]  # candidate's low side, reference's high side
    above = [math.log(1.9 / 1.5), math.log(0.8 / 0.7)]
    assert center - math.log(low) == pytest.approx(sum(below))
    assert math.log(high) - center == pytest.approx(sum(above))
    assert center - math.log(low) >= math.hypot(*below) and math.log(high) - center >= math.hypot(*above)


def test_a_missing_side_gives_null_with_the_reason() -> None:
    assert versus(over_baseline(None, None, "incorrect"), Relative(1.0, (0.9, 1.1))).to_json() == {
        "value": None,
        "reason": "incorrect",
    }
    failed = {"kind": "compile", "status": "runtime_error", "speedup": None, "ci": None, "reason": "no fake impl"}
    document = speedup_vs_json(Relative(2.0, (1.9, 2.1)), {"compile": failed})
    assert document["baseline"] == {"value": 2.0, "ci": [1.9, 2.1]}
    assert document["compile"]["value"] is None and "no fake impl" in document["compile"]["reason"]
    assert document["eager"]["value"] is None and "no reference point" in document["eager"]["reason"]


def test_a_stored_point_reads_back_as_its_speedup_over_the_baseline() -> None:
    point = {"kind": "eager", "status": "faster", "speedup": 20.0, "ci": [18.0, 22.0], "reason": ""}
    assert point_relative(point) == Relative(20.0, (18.0, 22.0))
    assert versus(Relative(1.0, (0.98, 1.02)), point_relative(point)).short("eager") == "0.05x eager"
