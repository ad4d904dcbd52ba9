"""The evaluation path must work where only torch is installed (the GPU machine lacks
sqlalchemy, alembic and openai): `kernel-agent eval` with those imports blocked."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import CANDIDATES, ROOT, SOFTMAX

BLOCK_AND_RUN = """
import sys
for name in ("sqlalchemy", "alembic", "openai"):
    sys.modules[name] = None  # any import of them now fails
sys.argv = ["kernel-agent", "eval", sys.argv[1], sys.argv[2], "--json", "--sandbox", sys.argv[3]]
import runpy
runpy.run_module("kernel_agent", run_name="__main__")
"""


def test_eval_runs_without_database_or_llm_packages(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-c", BLOCK_AND_RUN, str(SOFTMAX), str(CANDIDATES / "wrong_values.py"), str(tmp_path / "sb")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "ModuleNotFoundError" not in proc.stderr and "ImportError" not in proc.stderr, proc.stderr[-2000:]
    verdict = json.loads(proc.stdout)
    assert verdict["status"] == "incorrect" and proc.returncode == 1
