"""A small real run with one accepted candidate, shared by the review, export and report tests.

Built through the real CLI: `optimize` on the softmax64 fixture with the scripted
OpenAI-compatible server replying with the known-faster rewrite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from conftest import CANDIDATES, ROOT, SOFTMAX, run_cli
from scripted_server import ScriptedServer


def fenced(path: Path) -> str:
    return f"Here is a faster kernel.\n```python\n{path.read_text()}```\n"


def build_run(
    tmp_path: Path,
    attempts: int = 3,
    problem: Path = SOFTMAX,
    candidate: Path = CANDIDATES / "faster.py",
    extra: tuple[str, ...] = (),
    db: Path | None = None,
) -> dict:
    """Optimize a problem (softmax64) for one round with one scripted reply (its known-faster rewrite);
    return the run's ids plus db and sandbox paths.

    Timing on a shared, loaded machine can reject even the known-faster rewrite (a noisy interval or a
    timer-mismatch check); a fresh run is tried again, up to `attempts` times, before giving up.
    """
    kernel: dict = {}
    for attempt in range(attempts):
        db_path, sandbox = db or tmp_path / f"runs{attempt}.db", tmp_path / "sandbox"
        with ScriptedServer([[fenced(candidate)]]) as server:
            proc = run_cli(
                "optimize",
                str(problem),
                *server.provider_args(),
                "--rounds",
                "1",
                "--samples",
                "1",
                "--threads",
                "1",
                "--db",
                str(db_path),
                "--sandbox",
                str(sandbox),
                "--json",
                *extra,
                env={"OPENAI_API_KEY": "sk-test-not-a-real-key"},
            )
        if proc.returncode == -signal.SIGABRT and "terminate called" in proc.stderr and attempt + 1 < attempts:
            # Open defect (seen once in 570 tests, 2026-12-01, not reproduced in 4 reruns): the optimize
            # process finished its kernels, stored them, then aborted at exit with "terminate called
            # without an active exception". Tried again rather than hidden: a repeat still fails here.
            continue
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout)
        kernel = result["kernels"][0]
        if kernel["status"] == "improved" and kernel["best_candidate"]:
            return {
                "db": db_path,
                "sandbox": sandbox,
                "run_id": result["run_id"],
                "best": kernel["best_candidate"],
                "kernel": kernel["name"],
            }
    raise AssertionError(f"the known-faster rewrite was not accepted in {attempts} runs: {kernel}")


def cli_with_input(*args: str, stdin: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`kernel-agent ARGS` with text piped to its stdin (the interactive review, driven by a script)."""
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "USER": "pipe-reviewer"},
    )
