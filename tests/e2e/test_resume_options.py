"""`optimize --resume` keeps every stored option or visibly replaces it, and the run evaluates with it (issue 32).

Cheap by design: the first sitting's kernel is refused for size before any sandbox starts, and each resume's baseline
runs under a 0.5 s timeout, so what the evaluation used shows in the stored reason within a second."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import SOFTMAX, run_cli


def stored_plan(db: Path) -> dict:
    with sqlite3.connect(db) as connection:
        (options,) = connection.execute("SELECT options FROM runs WHERE id = 1").fetchone()
    return json.loads(options)


def test_a_resume_keeps_or_visibly_replaces_the_stored_options(tmp_path: Path) -> None:
    db, common = tmp_path / "r.db", ["--db", str(tmp_path / "r.db"), "--sandbox", str(tmp_path / "sb"), "--json"]
    first = run_cli(
        "optimize", str(SOFTMAX), "--memory-budget", "0.1", "--timeout", "100", "--min-gain", "0.05", "--threads", "1",
        "--no-references", *common,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-2000:]
    assert json.loads(first.stdout)["kernels"][0]["status"] == "too_large"

    # Typed again: the new --timeout is used (the baseline cannot start in 0.5 s) and said in one line.
    second = run_cli(
        "optimize", "--resume", "1", "--retry", "too_large", "--memory-budget", "8", "--timeout", "0.5",
        "--threads", "1", *common,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr[-2000:]
    said = [line for line in second.stderr.splitlines() if "replaces the stored" in line]
    assert said == [
        "run 1: --timeout 0.5 replaces the stored --timeout 100, --memory-budget 8 replaces the stored "
        "--memory-budget 0.1 (every other option as stored)"
    ]
    (kernel,) = json.loads(second.stdout)["kernels"]
    assert kernel["status"] == "baseline_failed" and "timeout" in kernel["reason"], kernel
    plan = stored_plan(db)["evaluation"]
    assert (plan["timeout"], plan["min_gain"], plan["threads"], plan["memory_budget"]) == (0.5, 0.05, 1, 8.0)

    # Not typed: the stored (replaced) timeout and min-gain hold; --threads typed again with a new value is named.
    third = run_cli("optimize", "--resume", "1", "--retry", "baseline_failed", "--threads", "2", *common)
    assert third.returncode == 0, third.stderr[-2000:]
    said = [line for line in third.stderr.splitlines() if "replaces the stored" in line]
    assert said == ["run 1: --threads 2 replaces the stored --threads 1 (every other option as stored)"]
    (kernel,) = json.loads(third.stdout)["kernels"]
    assert kernel["status"] == "baseline_failed" and "timeout" in kernel["reason"], kernel
    plan = stored_plan(db)["evaluation"]
    assert (plan["timeout"], plan["min_gain"], plan["threads"]) == (0.5, 0.05, 2)

    # What a resume cannot take is refused before anything changes.
    retry = ["optimize", "--resume", "1", "--retry", "baseline_failed", *common]
    named = run_cli(*retry, str(SOFTMAX))
    assert named.returncode == 2 and "continues the run's own kernels" in named.stderr
    moved = run_cli(*retry, "--device", "cuda")
    assert moved.returncode == 2 and "--device cannot change on resume" in " ".join(moved.stderr.split())
    with sqlite3.connect(db) as connection:
        assert connection.execute("SELECT status FROM run_kernels").fetchall() == [("baseline_failed",)]
