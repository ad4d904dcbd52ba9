"""Batch runs that survive anything: SIGKILL and resume, budgets, manifests (real CLI, real server, real SQLite)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT, SOFTMAX, cli_args, run_cli
from scripted_server import ScriptedServer

VARIANTS = [
    "torch.softmax(x, dim=-1)",
    "torch.softmax(x, -1)",
    "x.softmax(dim=-1)",
    "torch.nn.functional.softmax(x, dim=-1)",
    "torch.exp(x - x.amax(dim=-1, keepdim=True))"
    " / torch.exp(x - x.amax(dim=-1, keepdim=True)).sum(dim=-1, keepdim=True)",
    "torch.softmax(x.contiguous(), dim=-1)",
    "torch.softmax(x, dim=1)",
    "torch.special.softmax(x, dim=-1)",
]


def reply(expression: str) -> str:
    return f"```python\nimport torch\n\n\ndef kernel(x):\n    return {expression}\n```"


def two_problems(tmp_path: Path) -> list[Path]:
    """Two independent kernels (the fixture problem under two names)."""
    folders = []
    for name in ("softmax_a", "softmax_b"):
        folder = tmp_path / name
        shutil.copytree(SOFTMAX, folder)
        folders.append(folder)
    return folders


def query(db: Path, sql: str) -> list[tuple]:
    connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return connection.execute(sql).fetchall()
    finally:
        connection.close()


def count(db: Path, table: str) -> int:
    try:
        return query(db, f"select count(*) from {table}")[0][0]
    except sqlite3.OperationalError:
        return 0


def start(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kernel_agent", *cli_args(args)],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_when(proc: subprocess.Popen[str], ready, limit: float = 240) -> bool:
    """SIGKILL the orchestrator the moment `ready()` holds; False if it finished first."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if ready():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the run neither reached the kill point nor finished")


def sandbox_processes(root: Path) -> list[int]:
    """Processes of this run's sandboxes (working inside `root`): none may outlive their orchestrator."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if Path(os.readlink(entry / "cwd")).is_relative_to(root):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_sigkill_at_three_moments_then_resume_completes_without_duplicates(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    kernels = [str(p) for p in two_problems(tmp_path)]
    base = ["--db", str(db), "--sandbox", str(tmp_path / "sandbox"), "--threads", "1", "--workers", "2", "--json"]
    env = {"OPENAI_API_KEY": "sk-test"}
    replies = [[reply(VARIANTS[i]), reply(VARIANTS[i + 1])] for i in range(0, len(VARIANTS), 2)]
    with ScriptedServer(replies) as server:
        first = [
            "optimize",
            *kernels,
            *server.provider_args(),
            "--rounds",
            "2",
            "--samples",
            "2",
            "--patience",
            "5",
            "--retries",
            "0",
            *base,
        ]
        moments = [
            lambda: count(db, "llm_calls") >= 1,  # 1: right after the first LLM reply was stored
            lambda: count(db, "evaluations") >= 4,  # 2: evaluations in flight, some stored
            lambda: count(db, "llm_calls") >= 3,  # 3: well into the second round
        ]
        proc = start(first, env)
        killed = 0
        for moment in moments:
            if kill_when(proc, moment):
                killed += 1
                time.sleep(1.0)
                assert sandbox_processes(tmp_path / "sandbox") == [], (
                    "sandboxed workers outlived their killed orchestrator"
                )
            (run_id,) = query(db, "select max(id) from runs")[0]
            proc = start(["optimize", "--resume", str(run_id), *base], env)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        assert killed >= 2, "the run finished before the kill points; the test proves nothing"
        requests = server.requests
    result = json.loads(out)
    assert {k["name"] for k in result["kernels"]} == {"softmax_a", "softmax_b"}
    assert all(k["status"] == "improved" for k in result["kernels"]), result
    assert query(db, "select status from runs") == [("completed",)]
    assert query(db, "pragma integrity_check") == [("ok",)]
    # Nothing duplicated: one row per distinct source per kernel, one evaluation per candidate.
    assert query(
        db,
        "select count(*) from (select run_kernel_id, source_hash, count(*) n "
        "from candidates where source_hash is not null group by 1, 2 having n > 1)",
    ) == [(0,)]
    assert query(
        db, "select count(*) from (select candidate_id, count(*) n from evaluations group by 1 having n > 1)"
    ) == [(0,)]
    assert query(
        db,
        "select count(*) from candidates c left join evaluations e on "
        "e.candidate_id = c.id where c.source_hash is not null and e.id is null",
    ) == [(0,)]
    # No completed LLM call was requested twice: every request the server saw is distinct and stored once.
    bodies = [json.dumps(r["messages"], sort_keys=True) + str(r.get("n")) for r in requests]
    assert len(bodies) == len(set(bodies)), "a prompt was sent twice"
    (paid,) = query(db, "select count(*) from llm_calls where cached = 0")[0]
    assert paid == len(requests)


def test_budgets_stop_new_work_and_are_reported(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices]\n"scripted" = [1000000.0, 1000000.0]\n')  # one dollar per token
    cases = [
        (["--max-candidates", "2"], "candidates", lambda db: count(db, "evaluations") - 1 == 2),
        (["--max-tokens", "10"], "tokens", lambda db: count(db, "llm_calls") == 1),
        (["--max-cost", "0.5", "--prices", str(prices)], "spent", lambda db: count(db, "llm_calls") == 1),
        (["--time-limit", "1"], "elapsed", lambda db: count(db, "llm_calls") == 0),
    ]
    for flags, needle, check in cases:
        db = tmp_path / f"budget-{flags[0].strip('-')}.db"
        with ScriptedServer([[reply(v) for v in VARIANTS[:4]]] * 3) as server:
            proc = run_cli(
                "optimize",
                str(SOFTMAX),
                *server.provider_args(),
                "--rounds",
                "3",
                "--samples",
                "4",
                "--db",
                str(db),
                "--sandbox",
                str(tmp_path / "sandbox"),
                "--threads",
                "1",
                "--json",
                *flags,
                env={"OPENAI_API_KEY": "sk-test"},
            )
        assert proc.returncode == 0, proc.stderr[-2000:]
        kernel = json.loads(proc.stdout)["kernels"][0]
        assert kernel["status"] == "budget_reached" and needle in kernel["reason"], (flags, kernel)
        assert check(db), (flags, count(db, "evaluations"), count(db, "llm_calls"))
        assert query(db, "select status from runs") == [("stopped",)]


def test_manifest_with_per_kernel_options_and_globs(tmp_path: Path) -> None:
    kernels = two_problems(tmp_path)
    manifest = tmp_path / "kernels.toml"
    manifest.write_text(
        f'[defaults]\nrounds = 1\n\n[[kernel]]\npath = "{kernels[0].name}"\nsamples = 1\n'
        "tolerances = {float32 = [1e-4, 1e-5]}\nmax_candidates = 1\n"
    )
    proc = run_cli(
        "optimize",
        "--manifest",
        str(manifest),
        str(tmp_path / "softmax_b*"),
        "--db",
        str(tmp_path / "m.db"),
        "--sandbox",
        str(tmp_path / "sb"),
        "--threads",
        "1",
        "--json",
        "--samples",
        "1",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = [k["name"] for k in json.loads(proc.stdout)["kernels"]]
    assert sorted(names) == ["softmax_a", "softmax_b"]
    (options,) = query(tmp_path / "m.db", "select options from runs")[0]
    plan = json.loads(options)
    spec = next(k for k in plan["kernels"] if k["path"].endswith("softmax_a"))
    assert spec["tolerances"] == {"float32": [1e-4, 1e-5]} and spec["max_candidates"] == 1
    bad = tmp_path / "bad.toml"
    bad.write_text('[[kernel]]\npath = "softmax_a"\nroundz = 3\n')
    proc = run_cli("optimize", "--manifest", str(bad), "--db", str(tmp_path / "m.db"))
    assert proc.returncode == 2 and "unknown option(s) roundz" in proc.stderr


def test_endpoint_down_for_good_ends_kernels_with_a_status(tmp_path: Path) -> None:
    with ScriptedServer([{"status": 503}] * 20) as server:
        proc = run_cli(
            "optimize",
            str(SOFTMAX),
            *server.provider_args(),
            "--retries",
            "1",
            "--db",
            str(tmp_path / "down.db"),
            "--sandbox",
            str(tmp_path / "sb"),
            "--threads",
            "1",
            env={"OPENAI_API_KEY": "sk-test"},
        )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "503" in proc.stderr
    assert query(tmp_path / "down.db", "select status, reason from run_kernels")[0][0] == "provider_failed"
    assert query(tmp_path / "down.db", "select count(*) from llm_calls where error is not null") == [(1,)]


def test_a_kernel_refused_for_size_runs_again_with_retry_and_a_raised_budget(tmp_path: Path) -> None:
    """The refusal says "raise it with --memory-budget GB": on resume, --retry too_large with a larger budget runs
    the kernel again, and the refusal stays stored beside the new baseline."""
    db, common = tmp_path / "r.db", ["--sandbox", str(tmp_path / "sb"), "--threads", "1", "--json"]
    proc = run_cli("optimize", str(SOFTMAX), "--memory-budget", "0.1", "--db", str(db), *common)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (kernel,) = json.loads(proc.stdout)["kernels"]
    assert kernel["status"] == "too_large" and "the --memory-budget is 0.10 GB" in kernel["reason"]
    retry = ["--resume", "1", "--retry", "too_large"]
    proc = run_cli("optimize", *retry, "--memory-budget", "8", "--db", str(db), *common)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 kernel(s) that ended too_large will run again" in " ".join(proc.stderr.split())
    (kernel,) = json.loads(proc.stdout)["kernels"]
    assert kernel["status"] not in ("too_large", "pending", "running"), kernel
    baselines = query(
        db,
        "select e.status, e.reason from candidates c join evaluations e on e.candidate_id = c.id "
        "where c.origin = 'baseline' order by c.id",
    )
    assert [status for status, _ in baselines] == ["rejected", "correct"] or baselines[1][0] == "faster", baselines
    assert baselines[0][1].startswith("too large for this machine")
    again = run_cli("optimize", "--resume", "1", "--retry", "too_large", "--db", str(db), *common)
    assert again.returncode == 2 and "already completed" in again.stderr  # nothing left to retry
    assert run_cli("optimize", str(SOFTMAX), "--retry", "too_large", "--db", str(db)).returncode == 2
    wrong = run_cli("optimize", "--resume", "1", "--retry", "no_gain", "--db", str(db))
    assert wrong.returncode == 2 and "--retry takes too_large or baseline_failed" in " ".join(wrong.stderr.split())


INJECT = """
import sys
from kernel_agent.optimize import kernel_loop

original = kernel_loop.KernelLoop._references


def broken(self, measure):
    if self.problem.name == "softmax_b" and measure:
        raise OSError(9, "Bad file descriptor (injected)")
    return original(self, measure)


kernel_loop.KernelLoop._references = broken
from kernel_agent.cli import main

sys.argv = ["kernel-agent", *sys.argv[1:]]
main()
"""


def test_one_kernels_exception_ends_that_kernel_alone_and_the_table_still_prints(tmp_path: Path) -> None:
    """Issue 40: `[f.result() for f in futures]` with no handler let one kernel's exception end the whole batch
    with a traceback. Injected here after softmax_b's baseline; softmax_a must finish and the run resume."""
    folders = two_problems(tmp_path)
    db = tmp_path / "runs.db"
    args = cli_args(["optimize", *map(str, folders), "--db", str(db), "--rounds", "1", "--threads", "1"])
    proc = subprocess.run(
        [sys.executable, "-c", INJECT, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    rows = dict(query(db, "select p.name, k.status from run_kernels k join problems p on p.id = k.problem_id"))
    assert rows["softmax_b"] == "error" and rows["softmax_a"] in ("improved", "no_gain"), rows
    (reason,) = query(
        db, "select k.reason from run_kernels k join problems p on p.id = k.problem_id where p.name = 'softmax_b'"
    )[0]
    assert "OSError" in reason and "injected" in reason and "kernel-agent.log" in reason
    assert query(db, "select status from runs") == [("stopped",)]
    table = proc.stdout
    assert "softmax_a" in table and "softmax_b" in table and "error" in table
    assert "Bad file descriptor (injected)" in (tmp_path / "kernel-agent.log").read_text()
    resumed = run_cli("optimize", "--resume", "1", "--db", str(db), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = dict(query(db, "select p.name, k.status from run_kernels k join problems p on p.id = k.problem_id"))
    assert rows["softmax_b"] in ("improved", "no_gain"), rows
    assert query(db, "select status from runs") == [("completed",)]


HOSTILE = [
    # a terabyte stride-0 view (the orchestrator used to die allocating it), a forged timed-call description,
    # a crash, a hang, a lie about its outputs' count
    "import torch\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1).reshape(-1)[:1].expand(1 << 40)\n",
    (ROOT / "tests" / "adversarial" / "fixtures" / "w3a_forged_timed_only.py").read_text(),
    "import os\n\n\ndef kernel(x):\n    os.abort()\n",
    "def kernel(x):\n    while True:\n        pass\n",
    "import torch\n\n\ndef kernel(x):\n    out = torch.softmax(x, dim=-1)\n    return (out,) * 64\n",
]


def test_hostile_candidates_among_honest_ones_leave_every_kernel_finished(tmp_path: Path) -> None:
    """Issue 31: nothing a candidate does may end an `optimize` without finishing its other candidates and
    kernels. Each kernel's one round gets five hostile candidates and an honest one."""
    folders = two_problems(tmp_path)
    db = tmp_path / "hostile.db"
    choices = [f"```python\n{source}```" for source in HOSTILE] + [reply(VARIANTS[1])]
    with ScriptedServer([choices, choices]) as server:
        proc = run_cli(
            "optimize",
            *map(str, folders),
            *server.provider_args(),
            "--rounds",
            "1",
            "--samples",
            str(len(choices)),
            "--retries",
            "0",
            "--timeout",
            "20",
            "--db",
            str(db),
            "--sandbox",
            str(tmp_path / "sandbox"),
            "--threads",
            "1",
            "--json",
            env={"OPENAI_API_KEY": "sk-test"},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    kernels = json.loads(proc.stdout)["kernels"]
    assert sorted(k["name"] for k in kernels) == ["softmax_a", "softmax_b"]
    assert all(k["status"] in ("improved", "no_gain") for k in kernels), kernels
    statuses = query(
        db,
        "select p.name, e.status from evaluations e join candidates c on c.id = e.candidate_id "
        "join run_kernels k on k.id = c.run_kernel_id join problems p on p.id = k.problem_id where c.round = 1",
    )
    for name in ("softmax_a", "softmax_b"):
        seen = sorted(status for kernel, status in statuses if kernel == name)
        assert len(seen) == len(choices), statuses
        assert seen.count("incorrect") == 3 and "crashed" in seen and "timeout" in seen, seen
        assert any(s in ("correct", "faster") for s in seen), seen
