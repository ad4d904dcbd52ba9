"""Real sizes (issue 13): a 256 MB problem gets its verdict within the memory bound, and a problem
too large for the machine (or for --memory-budget) is refused in seconds, with its numbers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from conftest import FIXTURES, ROOT

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.footprint import largest_footprint
from kernel_agent.problem.load import load_problem

LARGE = FIXTURES / "large"
MB = 1 << 20
EVALUATE = r"""
import json, resource, sys
from pathlib import Path
from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem
problem = load_problem(sys.argv[1])
verdict = evaluate(problem, problem.baseline_as_candidate,
                   EvalOptions(sandbox_root=Path(sys.argv[2]), threads=1, timing_rounds=4))
print(json.dumps({"status": verdict.status, "reason": verdict.reason,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "workers": {k: v.get("peak_rss_mb") for k, v in (verdict.accounting or {}).items()}}))
"""


def test_a_256_mb_problem_gets_its_verdict_within_the_memory_bound(tmp_path: Path) -> None:
    """Bound (issue 13): each process at most 4x one call's working set plus 1.5 GB."""
    proc = subprocess.run(
        [sys.executable, "-c", EVALUATE, str(LARGE / "relu256"), str(tmp_path / "sandbox")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["status"] in ("correct", "faster"), result["reason"]
    bound_mb = 4 * 256 + 1536
    assert result["peak_mb"] < bound_mb, result
    assert all(0 < peak < bound_mb for peak in result["workers"].values()), result


def test_a_problem_too_large_for_the_machine_is_refused_in_seconds(tmp_path: Path) -> None:
    started = time.monotonic()
    problem = load_problem(LARGE / "too_large.py")  # shapes from the meta device: nothing allocated
    verdict = evaluate(
        problem,
        (LARGE / "too_large.py").read_text() + "\nModelNew = Model\n",
        EvalOptions(sandbox_root=tmp_path / "sandbox"),
    )
    assert verdict.status == "rejected"
    assert (
        "too large for this machine" in verdict.reason
        and "64.00 GB" in verdict.reason
        and "--memory-budget" in verdict.reason
    )
    assert time.monotonic() - started < 20
    assert set(verdict.durations) == {"size"} and verdict.elapsed < 20  # the refusal's own time, as stored


def test_a_problem_over_the_memory_budget_is_refused_with_the_budget_named(tmp_path: Path) -> None:
    verdict = evaluate(
        load_problem(LARGE / "relu256"),
        (LARGE / "relu256" / "kernel.py").read_text(),
        EvalOptions(sandbox_root=tmp_path / "sandbox", memory_budget=2.0),
    )
    assert verdict.status == "rejected"
    assert "the --memory-budget is 2.00 GB" in verdict.reason


def test_a_batch_over_a_kernelbench_level_gives_every_file_a_status_and_goes_on(tmp_path: Path) -> None:
    """A folder of KernelBench files, as `optimize PATH/TO/KernelBench/level1` reads it: the file too
    large is refused with its numbers and the run goes on to the next file."""
    import shutil
    import sqlite3

    from conftest import run_cli

    level = tmp_path / "level1"
    level.mkdir()
    shutil.copy(LARGE / "too_large.py", level / "1_too_large.py")
    shutil.copy(FIXTURES / "kernelbench" / "kb_rowloop.py", level / "2_rowloop.py")
    db = tmp_path / "runs.db"
    args = (
        "optimize",
        str(level),
        "--db",
        str(db),
        "--rounds",
        "1",
        "--sandbox",
        str(tmp_path / "sandbox"),
        "--threads",
        "1",
    )
    proc = run_cli(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = (
        sqlite3.connect(db)
        .execute(
            "select p.name, k.status, k.reason from run_kernels k join problems p on p.id = k.problem_id order by k.id"
        )
        .fetchall()
    )
    assert [(name, status) for name, status, _ in rows][0] == ("1_too_large", "too_large")
    assert "64.00 GB" in rows[0][2] and "--memory-budget" in rows[0][2]
    assert rows[1][0] == "2_rowloop" and rows[1][1] in ("no_gain", "improved", "needs_review")


CONV_SMALL_INPUTS = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(16, 16, 7)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(4, 16, 128, 128)]  # 4 MB of inputs; its float64 gold unfolds 0.37 GB of columns


def get_init_inputs():
    return []


ModelNew = Model
"""


def test_small_inputs_do_not_bring_a_float64_gold_the_budget_left_out(tmp_path: Path) -> None:
    """A case with small inputs took the gold whatever the budget said; level1/60 (54 MB of inputs, 0.8 GB of
    outputs, an 8 GB float64 column buffer) was booked without its gold and took it: an OOM kill."""
    path = tmp_path / "conv_small_inputs.py"
    path.write_text(CONV_SMALL_INPUTS)
    problem = load_problem(path)
    footprint = largest_footprint(problem)
    assert footprint.gold_workspace > 256 * MB
    budget = (footprint.needed_without_gold + footprint.needed) / 2 / (1 << 30)  # fits without the gold only
    options = EvalOptions(sandbox_root=tmp_path / "sandbox", memory_budget=budget, threads=1, timing_rounds=4)
    verdict = evaluate(problem, CONV_SMALL_INPUTS, options)
    assert verdict.status in ("correct", "faster"), verdict.reason
    judged = [
        check for check in verdict.checks if check.get("passed") is not None
    ]  # hard draws past the budget: not checked
    assert judged and all("same-dtype" in check.get("reference", "") for check in judged)
    with_gold = evaluate(problem, CONV_SMALL_INPUTS, replace(options, memory_budget=None))
    assert with_gold.status in ("correct", "faster"), with_gold.reason
    assert not any("reference" in check for check in with_gold.checks)  # where it fits, the gold is used
