"""A gain one pair of processes cannot resolve is timed again on three (issue 36): the bundled C++ softmax
against a copy of its problem whose baseline also runs the kernel on 8% of the rows (a true gain of about 8%,
no more than the one-pair interval's assumed process effect on each side: one pair cannot accept it). The
second look sets the first reading aside and says what it was; an honest copy never reads FAST after it."""

from __future__ import annotations

import shutil

from conftest import EXAMPLES

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem

PROBLEM = EXAMPLES / "cpp_softmax"
BUNDLED = (PROBLEM / "kernel.py").read_text()
EXTRA_ROWS = """

def kernel(x):
    out = _bundled_kernel(x)
    _bundled_kernel(x[: max(1, round(0.08 * x.shape[0]))])
    return out
"""


def test_an_unresolved_8pct_gain_gets_a_second_look_on_three_pairs(tmp_path) -> None:
    folder = tmp_path / "cpp_softmax_extra8"
    shutil.copytree(PROBLEM, folder, ignore=shutil.ignore_patterns("candidates", "__pycache__"))
    (folder / "kernel.py").write_text(BUNDLED.replace("def kernel(", "def _bundled_kernel(", 1) + EXTRA_ROWS)
    options = EvalOptions(sandbox_root=tmp_path / "sb", threads=1, second_look=3)
    looked = []
    for _ in range(3):  # a first point at or under 1.02 (a process effect) asks for no look
        verdict = evaluate(load_problem(folder), BUNDLED, options)
        assert verdict.status in ("faster", "correct"), verdict.reason
        assert verdict.timing is not None, verdict.reason  # a busy machine refuses to time
        processes = verdict.timing.processes
        if processes is not None and processes.second_look_of is not None:
            looked.append(verdict)
            assert processes.pairs == 3
            first = processes.second_look_of
            assert first.ci[0] <= 1.02 < first.speedup  # what triggered it: a gain the interval spanned
            assert verdict.timing.resolution.speed_class != "SLOW", verdict.reason
    assert looked, "no verdict of an 8% gain had a second look"
    assert any(v.status == "faster" for v in looked), [v.reason for v in looked]


def test_an_honest_copy_is_never_fast_after_a_second_look(tmp_path) -> None:
    options = EvalOptions(sandbox_root=tmp_path / "sb", threads=1, second_look=3)
    for _ in range(2):
        copy = evaluate(load_problem(PROBLEM), BUNDLED, options)
        assert copy.status == "correct", copy.reason
        assert copy.timing is not None, copy.reason  # a busy machine refuses to time
        assert copy.timing.resolution.speed_class != "FAST", copy.reason
