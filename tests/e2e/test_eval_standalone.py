"""The evaluation path must work where only torch is installed (the GPU machine lacks
sqlalchemy, alembic and openai): `kernel-agent eval` and `profile` with those imports blocked."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import CANDIDATES, ROOT, SOFTMAX

BLOCK_AND_RUN = """
import sys
for name in ("sqlalchemy", "alembic", "openai"):
    sys.modules[name] = None  # any import of them now fails
sys.argv = ["kernel-agent", *sys.argv[1:]]
import runpy
runpy.run_module("kernel_agent", run_name="__main__")
"""


def test_eval_runs_without_database_or_llm_packages(tmp_path) -> None:
    proc = run_blocked(
        "eval", str(SOFTMAX), str(CANDIDATES / "wrong_values.py"), "--json", "--sandbox", str(tmp_path / "sb")
    )
    verdict = json.loads(proc.stdout)
    assert verdict["status"] == "incorrect" and proc.returncode == 1


def test_profile_measures_ceilings_without_storing_them(tmp_path) -> None:
    """scripts/gpu-check runs `profile --device cuda --json` on that machine."""
    proc = run_blocked("profile", str(SOFTMAX), "--threads", "1", "--json", "--db", str(tmp_path / "runs.db"))
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and data["ceilings"]["memory_gbps"] > 0
    assert data["ceilings_origin"] == "measured now, not stored (sqlalchemy is not installed)"
    assert data["timing"]["status"] in ("correct", "faster") and not (tmp_path / "runs.db").exists()


def run_blocked(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", BLOCK_AND_RUN, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert "ModuleNotFoundError" not in proc.stderr and "ImportError" not in proc.stderr, proc.stderr[-2000:]
    return proc
