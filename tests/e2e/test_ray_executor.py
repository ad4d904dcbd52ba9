"""The Ray executor on a local CPU cluster: `optimize --executor ray` end to end against the local
pool, and worker loss (the Ray worker process SIGKILLed mid-evaluation) ending as a retried or
`crashed` verdict, never a lost or duplicated evaluation row."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, SOFTMAX, cli_args, run_cli

pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'kernel-agent[cluster]'")

from kernel_agent.optimize.executors.ray import TASK_NAME  # noqa: E402

pytestmark = pytest.mark.slow
CANDIDATE = "import torch\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1)\n"


def evaluating_workers() -> list[int]:
    """Pids of Ray worker processes running an evaluation right now (their title is ray::kernel_agent_evaluate)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(f"ray::{TASK_NAME}".encode()):
            found.append(int(entry))
    return found


class WorkerKiller(threading.Thread):
    """SIGKILL the first `kills` evaluating Ray workers seen (a different process each time)."""

    def __init__(self, kills: int, deadline_s: float = 120) -> None:
        super().__init__(daemon=True)
        self.kills, self.deadline = kills, time.monotonic() + deadline_s
        self.killed: list[int] = []
        self.done = threading.Event()

    def run(self) -> None:
        while len(self.killed) < self.kills and time.monotonic() < self.deadline and not self.done.is_set():
            for pid in evaluating_workers():
                if pid not in self.killed:
                    time.sleep(0.3)  # let it get into the evaluation (sandbox started, workdir written)
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    self.killed.append(pid)
                    break
            time.sleep(0.05)


def rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as connection:
        return connection.execute(sql).fetchall()


def optimize_args(tmp_path: Path, name: str, *extra: str) -> list[str]:
    return [
        "optimize",
        str(SOFTMAX),
        "--db",
        str(tmp_path / f"{name}.db"),
        "--sandbox",
        str(tmp_path / f"sandbox-{name}"),
        "--threads",
        "1",
        "--rounds",
        "1",
        "--samples",
        "1",
        "--json",
        *extra,
    ]


def test_optimize_on_ray_stores_verdicts_like_the_local_pool_and_survives_a_killed_worker(tmp_path: Path) -> None:
    """The CLI starts its own local Ray; the first evaluation's worker is SIGKILLed and the evaluation retried."""
    killer = WorkerKiller(kills=1)
    killer.start()
    ray_proc = subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", *cli_args(optimize_args(tmp_path, "ray", "--executor", "ray"))],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    local = run_cli(*optimize_args(tmp_path, "local"))  # meanwhile, the same run on the local pool
    out, err = ray_proc.communicate(timeout=300)
    killer.done.set()
    assert ray_proc.returncode == 0, err[-3000:]
    assert local.returncode == 0, local.stderr[-3000:]
    assert killer.killed, "no Ray worker was seen evaluating"
    assert "executor: Ray at a local Ray instance" in err

    ray_db, local_db = tmp_path / "ray.db", tmp_path / "local.db"
    plan = json.loads(rows(ray_db, "select options from runs")[0][0])
    assert plan["executor"] == "ray" and plan["ray_address"] is None
    assert json.loads(out)["kernels"][0]["name"] == json.loads(local.stdout)["kernels"][0]["name"] == "softmax64"
    query = (
        "select c.origin, c.source_hash, e.status, e.correct, e.device, e.isolation, e.verdict, e.environment "
        "from candidates c join evaluations e on e.candidate_id = c.id order by c.id"
    )
    on_ray, on_local = rows(ray_db, query), rows(local_db, query)
    assert [r[:2] for r in on_ray] == [r[:2] for r in on_local]  # same candidates, same sources
    for ray_row, local_row in zip(on_ray, on_local):
        assert ray_row[2] in ("faster", "correct", "flagged") and local_row[2] in ("faster", "correct", "flagged")
        assert ray_row[3:6] == local_row[3:6]  # correct, device, isolation
        ray_verdict, local_verdict = json.loads(ray_row[6]), json.loads(local_row[6])
        assert set(ray_verdict) == set(local_verdict)
        assert [c["case"] for c in ray_verdict["checks"]] == [c["case"] for c in local_verdict["checks"]]
        assert all(c["passed"] for c in ray_verdict["checks"])
        assert json.loads(ray_row[7])["executor"]["kind"] == "ray" and "executor" not in json.loads(local_row[7])
    # One evaluation row per candidate; the killed evaluation was retried, and that is recorded with its verdict.
    assert rows(ray_db, "select count(*), count(distinct candidate_id) from evaluations")[0] == (
        len(on_ray),
        len(on_ray),
    )
    assert rows(ray_db, "select count(*) from candidates where source_hash is not null")[0][0] == len(on_ray)
    executors = [json.loads(r[7])["executor"] for r in on_ray]
    assert sum(e["attempts"] for e in executors) == len(on_ray) + 1
    retried = [e for e in executors if e["attempts"] == 2]
    assert len(retried) == 1, executors
    assert "WorkerCrashedError" in retried[0]["lost"][0] or "died" in retried[0]["lost"][0].lower(), retried


def test_a_worker_lost_on_every_try_ends_as_crashed(tmp_path: Path) -> None:
    from kernel_agent.evaluate.pipeline import EvalOptions
    from kernel_agent.optimize.executors.ray import RayExecutor
    from kernel_agent.problem.load import load_problem

    executor = RayExecutor(None, None, retries=1, num_cpus=2)
    try:
        assert executor.cpu_slots == 1 and executor.gpus == 0
        killer = WorkerKiller(kills=2)
        killer.start()
        verdict = executor.submit(
            load_problem(SOFTMAX), CANDIDATE, EvalOptions(threads=1, sandbox_root=tmp_path / "sandbox")
        ).result(timeout=180)
        killer.done.set()
        assert len(killer.killed) == 2
        assert verdict.status == "crashed"
        assert verdict.reason.startswith("evaluation lost with its Ray worker after 2 tries"), verdict.reason
        assert verdict.environment["executor"]["attempts"] == 2 and len(verdict.environment["executor"]["lost"]) == 2
    finally:
        executor.shutdown()
