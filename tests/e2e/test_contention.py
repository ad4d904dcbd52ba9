"""A loaded machine gets a refusal, not a number (issue 31, defect 3): with another process busy on the timing
core, two honest copies read anything from 0.28x to 24x; the verdict must say the machine was too busy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SOFTMAX

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.evaluate.sandbox.groups import timing_cpus
from kernel_agent.problem.load import load_problem

SPIN = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"


@pytest.mark.skipif(timing_cpus(1) is None, reason="needs a timing core apart from the others (2 cores or more)")
def test_a_busy_timing_core_is_a_refusal_with_the_share(tmp_path: Path) -> None:
    core = max(timing_cpus(1) or {0})
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN], preexec_fn=lambda: os.sched_setaffinity(0, {core}))
        for _ in range(2)
    ]
    try:
        verdict = evaluate(
            load_problem(SOFTMAX),
            (SOFTMAX / "kernel.py").read_text(),
            EvalOptions(sandbox_root=tmp_path, threads=1, timing_rounds=4, sequential=False),
        )
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert verdict.status == "correct" and verdict.speedup is None, (verdict.status, verdict.reason)
    assert "the machine was too busy to measure" in verdict.reason and "other processes" in verdict.reason
