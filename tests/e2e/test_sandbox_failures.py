"""Ordinary failures a new user meets, answered with a verdict and its cause (issue 11, defects 3 and 4)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from conftest import FIXTURES, ROOT, run_cli

from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.problem.load import load_problem


def test_a_kernelbench_file_in_a_private_folder_gets_a_verdict(tmp_path: Path) -> None:
    """A folder of mode 0700 (what `mktemp -d` makes) holding the problem and, below it, the work dirs:
    the baseline's sandbox used to be denied its own config there (every verdict `runtime_error`)."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    os.chmod(private, 0o700)
    shutil.copy(FIXTURES / "kernelbench" / "kb_rowloop.py", private / "kb_rowloop.py")
    shutil.copy(FIXTURES / "kernelbench" / "kb_rowloop_new.py", private / "candidate.py")
    proc = run_cli(
        "eval", "kb_rowloop.py", "candidate.py", "--json", "--threads", "1", cwd=private, env={"PYTHONPATH": str(ROOT)}
    )
    verdict = json.loads(proc.stdout)
    assert verdict["status"] in ("faster", "correct"), verdict["reason"]
    assert not (private / "sandbox").exists() or not list((private / "sandbox").iterdir())


def test_a_worker_that_dies_names_its_last_error_line(tmp_path: Path) -> None:
    candidate = (
        "import os, sys\nsys.stderr.write('ValueError: the device table is missing row 7\\n')\nsys.stderr.flush()\n"
        "os._exit(3)\n"
    )
    verdict = evaluate(
        load_problem(FIXTURES / "softmax64"),
        candidate + "def kernel(x):\n    return x\n",
        EvalOptions(sandbox_root=tmp_path / "sandbox", threads=1),
    )
    assert verdict.status == "crashed"
    assert "worker exited (code 3) without answering" in verdict.reason
    assert "the device table is missing row 7" in verdict.reason


def test_a_worker_killed_by_a_signal_says_which_and_why(tmp_path: Path) -> None:
    source = (
        (FIXTURES / "candidates" / "segfault.py")
        .read_text()
        .replace("    load_library(", "    print('about to call crash()', flush=True)\n    load_library(")
    )
    verdict = evaluate(
        load_problem(FIXTURES / "softmax64"),
        source,
        EvalOptions(sandbox_root=tmp_path / "sandbox", threads=1, build_store=tmp_path / "store"),
    )
    assert verdict.status == "crashed", verdict.reason
    assert "SIGSEGV" in verdict.reason and "about to call crash()" in verdict.reason


def test_a_baseline_that_does_not_build_is_a_runtime_error_before_any_sandbox_starts(tmp_path: Path) -> None:
    """The baseline is built before either worker is launched (it is launched beside the candidate's): a
    problem whose own C++ does not compile ends `runtime_error` naming the baseline, and leaves nothing behind."""
    problem_dir = tmp_path / "broken"
    shutil.copytree(ROOT / "examples" / "cpp_softmax", problem_dir)
    kernel = problem_dir / "kernel.py"
    kernel.write_text(kernel.read_text().replace("#define ROW_BLOCK 1", "#define ROW_BLOCK 1\n#error broken baseline"))
    candidate = (ROOT / "examples" / "cpp_softmax" / "candidates" / "faster.py").read_text()
    sandbox = tmp_path / "sandbox"
    verdict = evaluate(load_problem(problem_dir), candidate, EvalOptions(sandbox_root=sandbox, threads=1))
    assert verdict.status == "runtime_error" and "the baseline failed to build" in verdict.reason, verdict.reason
    assert "sandbox_start" not in verdict.durations
    assert not list(sandbox.glob("*/")), "the evaluation's folder was not removed"
