"""`kernel-agent select report` on a stored table (real SQLite, the real CLI; nothing timed, a few seconds):
the best config of each held-out shape is known, so nearest-shape must find it and the default must not."""

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

PROBLEM = FIXTURES / "tune_softmax"
TRAIN = [(64, 256), (64, 4096), (2, 256), (2, 4096)]
HELDOUT = [(48, 300), (3, 3000)]


def synthetic_ms(shape: tuple[int, int], config: dict) -> float:
    """Many rows want the large row block, few rows the small one; the broken config never runs."""
    wanted = 256 if shape[0] >= 32 else 1
    return 1.0 if config["ROW_BLOCK"] == wanted else 2.0


def test_select_report_scores_stored_rows(tmp_path: Path) -> None:
    db_path = tmp_path / "runs.db"
    problem = load_problem(PROBLEM)
    rows = []
    for shape in TRAIN + HELDOUT:
        for config in configs(problem):
            if config["VEC"] == "broken":
                rows.append(ConfigTime(shape, "float32", config, Stage.SCREEN, "compile_error", reason="no VEC"))
            else:
                ms = synthetic_ms(shape, config)
                rows.append(ConfigTime(shape, "float32", config, Stage.SCREEN, TIMED, ms, (ms, ms)))
    # The fixture declares one training and one held-out shape; a copy of it names the stored ones.
    folder = tmp_path / "problem"
    folder.mkdir()
    source = (PROBLEM / "problem.py").read_text()
    source = source.replace("TUNE_SHAPES = [(64, 256)]", f"TUNE_SHAPES = {TRAIN}")
    source = source.replace("HELDOUT_SHAPES = [(8, 1024)]", f"HELDOUT_SHAPES = {HELDOUT}")
    (folder / "problem.py").write_text(source)
    (folder / "kernel.py").write_text(problem.baseline_source)
    copy = load_problem(folder)
    key = VariantKey(copy.name, problem_hash(copy), sha256(copy.baseline_source), fingerprint_key("cpu", 1), "float32")
    TuningStore(open_database(str(db_path)), key).put(rows)

    done = run_cli("select", "report", str(folder), "--threads", "1", "--db", str(db_path), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    scores = {s["name"]: s for s in json.loads(done.stdout)["scores"]}
    assert scores["nearest"]["geomean"] == 1.0 and scores["nearest"]["top1"] == 1.0
    assert scores["nearest"]["timed_fraction"] == 0.0
    assert scores["default"]["geomean"] < 1.0  # the default (ROW_BLOCK 256) is wrong for few rows
    assert {s["shapes"] for s in scores.values()} == {len(HELDOUT)}
    text = run_cli("select", "report", str(folder), "--threads", "1", "--db", str(db_path))
    assert text.returncode == 0 and "geometric mean over held-out shapes" in text.stdout
