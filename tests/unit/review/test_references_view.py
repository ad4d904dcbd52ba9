"""The report's view against torch: what a kernel would ship (its best, or its baseline) against eager and compile."""

from __future__ import annotations

import pytest

from kernel_agent.review.report.charts import references_chart
from kernel_agent.review.report.data import what_ships

EAGER = {"kind": "eager", "status": "faster", "speedup": 20.0, "ci": [18.0, 22.0]}
COMPILE = {"kind": "compile", "status": "faster", "speedup": 8.0, "ci": [7.0, 9.0]}


def test_a_kernel_with_no_gain_shows_its_baseline_against_torch() -> None:
    kernel = {
        "name": "cpp_matmul",
        "speedup_vs": {"baseline": {"value": None, "reason": "no best candidate"}},
        "references": {"eager": EAGER, "compile": COMPILE},
    }
    shown = what_ships(kernel)
    assert shown["eager"]["value"] == pytest.approx(0.05) and shown["eager"]["shipped"] == "baseline"
    assert shown["eager"]["ci"] == pytest.approx([1 / 22.0, 1 / 18.0])
    assert shown["compile"]["value"] == pytest.approx(0.125)


def test_a_kernel_with_a_best_shows_the_best_as_stored() -> None:
    versus = {"baseline": {"value": 2.0, "ci": [1.8, 2.2]}, "eager": {"value": 0.1, "ci": [0.08, 0.12]}}
    assert what_ships({"name": "k", "speedup_vs": versus, "references": {}}) is versus


def test_the_chart_labels_each_reference_and_is_absent_without_values() -> None:
    svg = references_chart([("cpp_matmul", {"baseline": {"value": 2.0, "ci": [1.8, 2.2]},
                                            "eager": {"value": 0.05, "ci": [0.04, 0.06]},
                                            "compile": {"value": None, "reason": "compile failed"}})])  # fmt: skip
    assert svg is not None and svg.lstrip().startswith("<")
    assert "0.05x eager" in svg and "2.00x baseline" in svg and "no compile point" in svg
    assert references_chart([("k", {"baseline": {"value": None, "reason": "no best candidate"}})]) is None
