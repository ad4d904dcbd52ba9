"""Problem canaries: every bundled problem rejects cheater outputs, and the same cheaters
submitted as real candidates are rejected as `incorrect` while the reference passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from adversarial.common import ROOT, SOFTMAX
from kernel_agent.evaluate.canaries import audit_problem
from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem

EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if (p / "problem.py").is_file()) + sorted(
    (ROOT / "examples" / "kernelbench").glob("*.py")
)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_bundled_problem_passes_its_canary_audit(path: Path) -> None:
    problem = load_problem(path)
    audit_problem(problem, "cpu")  # raises ProblemError naming the canary that passes


CANARIES = {
    "zeros": "return torch.zeros_like(x)",
    "ones": "return torch.ones_like(x)",
    "mean": "return torch.full_like(x, 1.0 / x.shape[-1])",
    "passthrough": "return x.clone()",
    "empty": "return torch.empty_like(x)",
    "random": "return torch.rand_like(x) / x.shape[-1]",
}


@pytest.mark.parametrize("name", sorted(CANARIES))
def test_canary_candidates_are_rejected_as_incorrect(tmp_path: Path, name: str) -> None:
    source = f"import torch\n\n\ndef kernel(x):\n    {CANARIES[name]}\n"
    verdict = evaluate(load_problem(SOFTMAX), source, EvalOptions(sandbox_root=tmp_path / "sandbox", timing_rounds=2))
    assert verdict.status == "incorrect", f"{name}: {verdict.status}: {verdict.reason}"
    assert "shape=" in verdict.reason


def test_the_reference_equivalent_candidate_passes(tmp_path: Path) -> None:
    source = "import torch\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1)\n"
    verdict = evaluate(load_problem(SOFTMAX), source, EvalOptions(sandbox_root=tmp_path / "sandbox", timing_rounds=4))
    assert verdict.correct is True and verdict.passed, verdict.reason
