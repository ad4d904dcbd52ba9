"""A problem's own reference must pass its check (issue 31, defect 1): the tolerance covers the float32
reference's own error against the float64 gold, measured at load; a lower-precision kernel still fails."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem

CANCELS = FIXTURES / "cancellation"


def test_the_reference_s_own_code_verifies_and_the_widening_is_recorded(tmp_path: Path) -> None:
    verdict = evaluate(
        load_problem(CANCELS), (CANCELS / "kernel.py").read_text(), EvalOptions(sandbox_root=tmp_path, threads=1)
    )
    assert verdict.status in ("correct", "faster"), verdict.reason
    recorded = verdict.tolerances["float32"]
    assert recorded["declared"]["atol"] == 1e-4 and recorded["atol"] > 2.4e-4
    assert "reference itself is off the float64 gold" in recorded["widened"]


def test_a_half_precision_rewrite_still_fails(tmp_path: Path) -> None:
    source = (
        "import torch\n\n\ndef kernel(x):\n    h = x.half()\n"
        "    return ((h + 5000.0) - 5000.0 + torch.sin(h)).float()\n"
    )
    verdict = evaluate(load_problem(CANCELS), source, EvalOptions(sandbox_root=tmp_path, threads=1))
    assert verdict.status == "incorrect", verdict.reason


def test_a_problem_whose_reference_is_exact_enough_keeps_its_tolerance(tmp_path: Path) -> None:
    softmax = FIXTURES / "softmax64"
    verdict = evaluate(
        load_problem(softmax), (softmax / "kernel.py").read_text(), EvalOptions(sandbox_root=tmp_path, threads=1)
    )
    assert "widened" not in verdict.tolerances["float32"] and verdict.tolerances["float32"]["atol"] == 1e-4
