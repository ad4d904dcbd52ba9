"""Shared fixtures: paths, and running the real CLI as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples"
SOFTMAX = FIXTURES / "softmax64"
CANDIDATES = FIXTURES / "candidates"


def run_cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run `kernel-agent ARGS` in a fresh interpreter, exactly as a user would."""
    command = [sys.executable, "-m", "kernel_agent", *args]
    return subprocess.run(command, cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def eval_json(problem: Path, candidate: Path, *extra: str, tmp_path: Path) -> tuple[dict, subprocess.CompletedProcess[str]]:
    proc = run_cli("eval", str(problem), str(candidate), "--json", "--sandbox", str(tmp_path / "sandbox"), "--threads", "1", *extra)
    assert proc.stdout.count("\n") == 1, f"expected one JSON line on stdout, got: {proc.stdout!r} / {proc.stderr[-2000:]}"
    return json.loads(proc.stdout), proc


@pytest.fixture
def sandbox_root(tmp_path: Path) -> Path:
    return tmp_path / "sandbox"
