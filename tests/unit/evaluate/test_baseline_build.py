"""The baseline's trusted build runs on its side's Deadline, like the candidate's: a compiler still busy when
the allowance ends is killed, and the evaluation ends with a one-line reason (a real gcc, a real sandbox)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from kernel_agent.core.verdict import Status
from kernel_agent.evaluate.context import EvalContext, EvalOptions
from kernel_agent.evaluate.preparation import EvaluationError, baseline_spec
from kernel_agent.problem.load import load_problem
from kernel_agent.problem.oracle import CaseMaker
from kernel_agent.sandbox.deadline import Deadline
from kernel_agent.sandbox.host.levels import probe

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cpp_softmax"

# Constant evaluation that keeps cc1plus busy for tens of seconds: the build cannot end on its own in time.
BUSY = r"""
constexpr unsigned long spin(unsigned long seed) {
    unsigned long x = seed;
    for (unsigned long i = 0; i < 2000; ++i)
        for (unsigned long j = 0; j < 2000; ++j) x = x * 6364136223846793005UL + j;
    return x;
}
#define ONE(n) constexpr unsigned long v##n = spin(n);
#define TEN(n) ONE(n##0) ONE(n##1) ONE(n##2) ONE(n##3) ONE(n##4) ONE(n##5) ONE(n##6) ONE(n##7) ONE(n##8) ONE(n##9)
TEN(1) TEN(2) TEN(3)
"""

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="the C++ baseline needs a compiler")


def busy_problem(folder: Path) -> Path:
    """cpp_softmax with a baseline whose C++ source the compiler cannot finish within the allowance."""
    shutil.copytree(EXAMPLE, folder)
    kernel = folder / "kernel.py"
    text = kernel.read_text()
    kernel.write_text(text.replace('CPP_SOURCE = r"""\n', 'CPP_SOURCE = r"""\n' + BUSY, 1))
    return folder


def test_a_baseline_build_past_its_deadline_ends_with_a_one_line_reason(tmp_path: Path) -> None:
    problem = load_problem(busy_problem(tmp_path / "busy_softmax"))
    options = EvalOptions(sandbox_root=tmp_path / "sandbox", build_store=tmp_path / "store", timeout=2, threads=1)
    root = tmp_path / "sandbox" / "evaluation"
    (root / "base").parent.mkdir(parents=True)
    isolation = probe(options.isolation).with_limits(options.limits)
    ctx = EvalContext(problem, "", options, "cpu", isolation, tmp_path / "sandbox", root, Deadline(options.timeout))
    started = time.monotonic()
    with pytest.raises(EvaluationError) as raised:
        baseline_spec(ctx, CaseMaker(problem, "cpu"))
    assert time.monotonic() - started < 6  # killed at its 2 s allowance, not at the build's own 60 s limit
    assert raised.value.status is Status.RUNTIME_ERROR
    reason = raised.value.reason
    assert reason.startswith("the baseline failed to build: the compiler ran past its 2 s time limit"), reason
    assert "what was left of the evaluation's timeout" in reason and "\n" not in reason
