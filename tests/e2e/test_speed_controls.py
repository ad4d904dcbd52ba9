"""Controls with known answers through the real evaluation (issue 36): the bundled C++ softmax against itself
(A/A) and against a candidate that runs it twice (2x slower), each timed on three pairs of processes
(`--processes 3`). The answers hold on a loaded 2-core machine too: a 2x loss reads SLOW (0.30-0.62x under
load 4 here), an honest copy never reads FAST (SAME, or AMBIGUOUS under load). benchmarks/resolution.py runs the same
controls, with calibrated 3%, 5% and 10% gains, in numbers."""

from __future__ import annotations

from conftest import EXAMPLES

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem

PROBLEM = EXAMPLES / "cpp_softmax"
BUNDLED = (PROBLEM / "kernel.py").read_text()
TWICE = BUNDLED.replace("def kernel(", "def _once(", 1) + "\n\ndef kernel(x):\n    _once(x)\n    return _once(x)\n"


def test_a_candidate_doing_twice_the_work_reads_slow_and_an_honest_copy_never_fast(tmp_path) -> None:
    options = EvalOptions(sandbox_root=tmp_path / "sb", threads=1, processes=3)  # --processes 3
    slow = evaluate(load_problem(PROBLEM), TWICE, options)
    assert slow.status == "correct", slow.reason
    assert slow.timing.resolution.speed_class == "SLOW", slow.reason
    assert 0.3 < slow.speedup < 0.62 and "SLOW: slower" in slow.reason
    copy = evaluate(load_problem(PROBLEM), BUNDLED, options)
    assert copy.status == "correct", copy.reason
    assert copy.timing.resolution.speed_class in ("SAME", "AMBIGUOUS"), copy.reason
    assert copy.timing.processes.pairs == 3
