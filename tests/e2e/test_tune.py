"""`kernel-agent tune` through the real sandbox on a tiny space (4 configs, 1 shape; about a minute on 2 cores):
one stored row per (shape, config, stage), failures stored as such, and a second run times nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import FIXTURES, run_cli

PROBLEM = FIXTURES / "tune_softmax"


def tune(db: Path, sandbox: Path):  # noqa: ANN201
    return run_cli(
        "tune", str(PROBLEM), "--shapes", "train", "--quick-rounds", "1", "--full-rounds", "2", "--top", "1",
        "--threads", "1", "--sandbox", str(sandbox), "--db", str(db), "--json",
    )  # fmt: skip


def test_tune_stores_every_config_once_and_resumes_without_timing(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = tune(db, tmp_path / "sandbox")
    assert first.returncode == 0, first.stderr[-2000:]
    rows = [json.loads(line) for line in first.stdout.splitlines()]
    screen = [r for r in rows if r["stage"] == 1]
    assert len(screen) == 4 and {r["shape"] == [64, 256] for r in screen} == {True}
    broken = [r for r in screen if r["config"]["VEC"] == "broken"]
    assert [r["status"] for r in broken] == ["compile_error", "compile_error"] and all(r["reason"] for r in broken)
    timed = [r for r in screen if r["config"]["VEC"] == 8]
    assert all(r["status"] == "timed" and r["time_ms"] > 0 for r in timed), timed
    assert all(r["ci_ms"][0] <= r["time_ms"] <= r["ci_ms"][1] for r in timed)
    confirm = [r for r in rows if r["stage"] == 2]
    assert {json.dumps(r["config"], sort_keys=True) for r in confirm} >= {'{"ROW_BLOCK": 256, "VEC": 8}'}  # default
    with sqlite3.connect(db) as connection:
        (stored,) = connection.execute("select count(*) from tuning_times").fetchone()
    assert stored == len(rows)

    again = tune(db, tmp_path / "sandbox")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "screen" not in again.stderr and "confirm" not in again.stderr  # nothing timed again
    assert [json.loads(line) for line in again.stdout.splitlines()] == rows
    with sqlite3.connect(db) as connection:
        assert connection.execute("select count(*) from tuning_times").fetchone() == (stored,)

    report = run_cli("select", "report", str(PROBLEM), "--threads", "1", "--db", str(db))
    assert report.returncode == 2 and "no held-out shape has a timed config" in report.stderr
    assert "Traceback" not in report.stderr


def test_the_triton_family_verifies_under_the_interpreter(tmp_path: Path) -> None:
    """Its default and a config with other blocks and no grouping: correct, never a speedup, on a CPU."""
    from conftest import EXAMPLES

    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
    from kernel_agent.problem.load import load_problem
    from kernel_agent.propose.tunables import apply_config

    problem = load_problem(EXAMPLES / "tuning" / "triton_tiled_matmul")
    other = {"BLOCK_M": 32, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1, "NUM_WARPS": 8, "NUM_STAGES": 4}
    for source in (problem.baseline_source, apply_config(problem.baseline_source, other)):
        verdict = evaluate(problem, source, EvalOptions(sandbox_root=tmp_path, device="cpu", threads=1))
        assert verdict.status == "correct" and verdict.interpreted, verdict.reason
        assert verdict.speedup is None and sum(1 for c in verdict.checks if c["passed"]) >= 4
