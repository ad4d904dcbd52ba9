"""`kernel-agent doctor` and the fallback line of `eval` (issue 32): the level in force and why a stronger one
failed, the checks a user needs, and no secret in the output."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import CANDIDATES, SOFTMAX, run_cli

SECRET = "sk-doctor-must-never-print-this"


def test_doctor_names_the_level_the_reason_and_every_area_without_the_key(no_bwrap_path: str, tmp_path: Path) -> None:
    proc = run_cli(
        "doctor", "--json", "--db", str(tmp_path / "r.db"), env={"PATH": no_bwrap_path, "OPENAI_API_KEY": SECRET}
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert SECRET not in proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    level = report["isolation"]
    assert level["level"] in ("unshare", "process") and level["failed"][0]["level"] == "bwrap"
    assert "bubblewrap is not installed" in level["failed"][0]["why"] and "apt-get" in level["failed"][0]["fix"]
    assert level["fallback"].startswith(f"isolation: {level['level']}, weaker than bwrap")
    checks = {(c["area"], c["name"]): c for c in report["checks"]}
    assert checks[("isolation", "in force")]["state"] == "weak"
    assert checks[("sandbox", "worker python")]["state"] == "ok", checks[("sandbox", "worker python")]
    assert checks[("settings", "LLM endpoint")]["found"].startswith("$OPENAI_API_KEY is set (not shown)")
    assert str(tmp_path / "r.db") in checks[("settings", "database")]["found"]
    areas = {area for area, _ in checks}
    assert {"isolation", "sandbox", "compilers", "python", "gpus", "accounting", "memory", "disk", "settings"} <= areas
    assert not (tmp_path / "r.db").exists(), "doctor created the database it only names"


def test_doctor_prints_a_table_and_eval_says_when_it_falls_back(no_bwrap_path: str, tmp_path: Path) -> None:
    table = run_cli("doctor", cwd=tmp_path)
    assert table.returncode == 0, table.stderr[-2000:]
    assert "isolation: bwrap" in table.stdout and "worker python" in table.stdout
    assert not (tmp_path / "sandbox").exists(), "doctor left its work dir behind"
    candidate = CANDIDATES / "wrong_values.py"  # ends `incorrect` at its first check: cheap
    proc = run_cli(
        "eval", str(SOFTMAX), str(candidate), "--json", "--threads", "1", "--sandbox", str(tmp_path / "sb"),
        env={"PATH": no_bwrap_path},
    )  # fmt: skip
    assert json.loads(proc.stdout)["status"] == "incorrect", proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if line.startswith("isolation: ")]
    assert len(said) == 1 and "weaker than bwrap (bwrap: bubblewrap is not installed" in said[0], proc.stderr
