"""Reference points end to end (issue 14): the real CLI, real sandboxes, a real SQLite file.

torch eager and torch.compile of a problem's reference are timed against its baseline once per
(problem, device fingerprint) and stored; later runs reuse them and `--remeasure-references` replaces
them. A reference torch.compile cannot trace records why and the run completes.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import FIXTURES, run_cli

UNCOMPILABLE = FIXTURES / "uncompilable"
KB_ROWLOOP = FIXTURES / "kernelbench" / "kb_rowloop.py"


def points(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(
            "select id, kind, status, speedup, measured_at, data from reference_points order by kind"
        ).fetchall()


def optimize(tmp_path: Path, *extra: str) -> dict:
    proc = run_cli(
        "optimize",
        str(UNCOMPILABLE),
        "--db",
        str(tmp_path / "runs.db"),
        "--sandbox",
        str(tmp_path / "sandbox"),
        "--threads",
        "1",
        "--rounds",
        "1",
        "--json",
        *extra,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_points_are_stored_once_reused_and_replaced_on_request(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    first = optimize(tmp_path, "--references")
    stored = points(db)
    assert [row[1] for row in stored] == ["compile", "eager"]
    compile_row, eager_row = stored
    # The reference cannot be compiled: the reason is recorded, the eager point and the run go on.
    assert compile_row[3] is None and "fake" in json.loads(compile_row[5])["reason"]
    assert eager_row[2] in ("faster", "correct", "flagged") and eager_row[3] > 0
    kernel = first["kernels"][0]
    assert kernel["status"] == "no_gain"
    assert kernel["references"]["compile"]["speedup"] is None and kernel["references"]["eager"]["speedup"] > 0
    assert first["metrics"]["n"] == {"baseline": 1, "eager": 1, "compile": 0}

    optimize(tmp_path)  # --references is the default: the stored points are read, not timed again
    assert points(db) == stored

    optimize(tmp_path, "--remeasure-references")
    again = points(db)
    assert [row[0] for row in again] == [row[0] for row in stored]  # replaced in place, one row per kind
    assert all(new[4] > old[4] for new, old in zip(again, stored))

    shown = run_cli("runs", "show", str(first["run_id"]), "--db", str(db), "--json")
    detail = json.loads(shown.stdout)
    assert detail["kernels"][0]["references"]["eager"]["speedup"] > 0
    assert set(detail["kernels"][0]["speedup_vs"]) == {"baseline", "eager", "compile"}
    assert detail["metrics"]["fast_p"]["baseline"]["fast_0"] == 0.0  # nothing was proposed: no correct candidate
    table = run_cli("runs", "show", str(first["run_id"]), "--db", str(db), env={"COLUMNS": "200"})
    assert "compile" in table.stdout and "fast_1.5" in table.stdout and "geomean" in table.stdout


def test_eval_json_carries_speedup_vs_and_a_kernelbench_eager_point_is_its_model(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    proc = run_cli(
        "eval",
        str(KB_ROWLOOP),
        str(FIXTURES / "kernelbench" / "kb_rowloop_new.py"),
        "--json",
        "--references",
        "--db",
        str(db),
        "--sandbox",
        str(tmp_path / "sandbox"),
        "--threads",
        "1",
    )
    verdict = json.loads(proc.stdout)
    assert verdict["speedup"] is not None, proc.stderr[-3000:]
    vs = verdict["speedup_vs"]
    assert vs["baseline"] == {"value": verdict["speedup"], "ci": verdict["speedup_ci"]}
    for kind in ("eager", "compile"):
        assert vs[kind]["value"] is not None, vs[kind]
        low, high = vs[kind]["ci"]
        assert low <= vs[kind]["value"] <= high
    with sqlite3.connect(db) as connection:
        eager = json.loads(connection.execute("select verdict from reference_points where kind='eager'").fetchone()[0])
    # The eager point of a KernelBench file is its Model against itself (the baseline is the Model too).
    assert eager["backend"] == "torch" and eager["status"] in ("faster", "correct", "flagged")
    assert 0.7 < eager["speedup"] < 1.4
    # A candidate's speedup over eager is its speedup over the baseline over eager's.
    assert vs["eager"]["value"] == verdict["speedup"] / eager["speedup"]


def test_a_compile_mode_adds_its_own_point_and_column(tmp_path: Path) -> None:
    result = optimize(tmp_path, "--references", "--compile-mode", "max-autotune-no-cudagraphs")
    stored = points(tmp_path / "runs.db")
    assert [row[1] for row in stored] == ["compile", "compile:max-autotune-no-cudagraphs", "eager"]
    mode_row = stored[1]
    assert mode_row[3] is None and "fake" in json.loads(mode_row[5])["reason"]  # its own failure, recorded
    kernel = result["kernels"][0]
    assert kernel["references"]["compile:max-autotune-no-cudagraphs"]["kind"] == "compile:max-autotune-no-cudagraphs"
    assert list(kernel["speedup_vs"]) == ["baseline", "eager", "compile", "compile:max-autotune-no-cudagraphs"]
    bad = run_cli("optimize", str(UNCOMPILABLE), "--db", str(tmp_path / "runs.db"), "--compile-mode", "fastest")
    assert bad.returncode == 2 and "unknown torch.compile mode 'fastest'" in bad.stderr
