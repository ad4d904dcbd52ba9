"""A loaded machine gets a refusal, not a wrong number (issue 31, defect 3): with another process busy on the timing
core, two honest copies read anything from 0.28x to 24x; the verdict must say the machine was too busy, or, where
the scheduler kept the spinners off the sandbox's timed blocks (others' share under the limit: 7-8.5% on this VM
on 2026-12-05, while stop 42's CI machine refused), its honest copy must still read the same speed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SOFTMAX

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem
from kernel_agent.sandbox.host.groups import timing_cpus

SPIN = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end:\n    pass\n"


@pytest.mark.skipif(timing_cpus(1) is None, reason="needs a timing core apart from the others (2 cores or more)")
def test_a_busy_timing_core_is_a_refusal_or_an_undisturbed_reading(tmp_path: Path) -> None:
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
    assert verdict.status == "correct", (verdict.status, verdict.reason)
    if verdict.speedup is None:
        assert "the machine was too busy to measure" in verdict.reason and "other processes" in verdict.reason
    else:  # not refused: then the honest copy's interval holds 1, never a 0.28x or a 24x
        low, high = verdict.speedup_ci
        assert low <= 1.0 <= high and 0.8 < verdict.speedup < 1.25, verdict.reason
