"""`optimize --trust-selector` through the real CLI, sandbox and SQLite: with tuning rows stored (synthetic, so
the selector's pick is known), the search times the selector's decision and stops, with no climb after."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import FIXTURES, run_cli

from kernel_agent.core.tuning import TIMED, ConfigTime, Stage
from kernel_agent.db.session import open_database
from kernel_agent.db.tuning import TuningStore, VariantKey
from kernel_agent.db.writes import problem_hash, sha256
from kernel_agent.measure.ceilings import fingerprint_key
from kernel_agent.problem.load import load_problem
from kernel_agent.tune.space import configs

PROBLEM = FIXTURES / "tune_softmax"  # benchmark shape (64, 256); default ROW_BLOCK=256 VEC=8
NEAR = [(64, 256), (48, 256), (64, 300)]
WINNER = {"ROW_BLOCK": 1, "VEC": 8}


def test_a_trusted_selector_times_its_decision_and_stops(tmp_path: Path) -> None:
    db_path = tmp_path / "runs.db"
    problem = load_problem(PROBLEM)
    rows = []
    for shape in NEAR:
        for config in configs(problem):
            if config["VEC"] == "broken":
                rows.append(ConfigTime(shape, "float32", config, Stage.SCREEN, "compile_error", reason="no VEC"))
            else:
                ms = 1.0 if config == WINNER else 2.0
                rows.append(ConfigTime(shape, "float32", config, Stage.SCREEN, TIMED, ms, (ms, ms)))
    key = VariantKey(
        problem.name, problem_hash(problem), sha256(problem.baseline_source), fingerprint_key("cpu", 1), "float32"
    )
    TuningStore(open_database(str(db_path)), key).put(rows)

    done = run_cli(
        "optimize", str(PROBLEM), "--threads", "1", "--rounds", "3", "--trust-selector", "--db", str(db_path), "--json"
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "1 of them its decision; --trust-selector: only those, no climb" in done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    listed = run_cli("candidates", "list", "--run", str(run_id), "--db", str(db_path), "--json")
    assert listed.returncode == 0, listed.stderr[-2000:]
    rows = json.loads(listed.stdout)
    rows = rows["candidates"] if isinstance(rows, dict) else rows
    timed = [r for r in rows if r.get("origin") not in ("baseline", "retime")]
    assert len(timed) == 1, timed  # the plain climb would also time the two VEC=broken configs
    assert "ROW_BLOCK=1" in timed[0]["note"] and "VEC=8" in timed[0]["note"], timed[0]
