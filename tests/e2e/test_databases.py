"""One schema, two databases: migrations, the store's round trips, concurrent writers and the
newer-schema refusal, on SQLite and on PostgreSQL.

PostgreSQL runs when KERNEL_AGENT_TEST_PG_URL names a server (CI sets it from
scripts/start-postgres); each test gets a database of its own, dropped afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, SOFTMAX, cli_args, shape_timing, timing_record
from sqlalchemy import inspect, make_url, text

from kernel_agent.core.timing_result import Summary
from kernel_agent.core.verdict import Verdict
from kernel_agent.db import writes as store
from kernel_agent.db.session import Database, DatabaseError, current_revision, open_database
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import LLMCall

PG_ENV = "KERNEL_AGENT_TEST_PG_URL"
TABLES = {
    "sources",
    "problems",
    "runs",
    "run_kernels",
    "candidates",
    "evaluations",
    "llm_calls",
    "reviews",
    "device_ceilings",
    "alembic_version",
}


def _admin_connect(url: str):
    import psycopg

    parsed = make_url(url)
    return psycopg.connect(
        host=parsed.host,
        port=parsed.port or 5432,
        user=parsed.username,
        password=parsed.password,
        dbname=parsed.database,
        autocommit=True,
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a uniquely named PostgreSQL database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'runs.db'}"
        return
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"PostgreSQL not configured: set {PG_ENV} (scripts/start-postgres prints one; .ci/run sets it)")
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'kernel-agent[cluster]'")
    name = f"ka_test_{uuid.uuid4().hex[:12]}"
    with _admin_connect(base) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with _admin_connect(base) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def scalar(db: Database, sql: str):
    with db.engine.connect() as connection:
        return connection.execute(text(sql)).scalar()


def test_migrations_from_empty(database_url: str) -> None:
    db = open_database(database_url)
    try:
        assert TABLES <= set(inspect(db.engine).get_table_names())
        assert current_revision(db.engine) is not None
        assert open_database(database_url).backup is None  # already at head: nothing to do
    finally:
        db.close()


def test_store_round_trip(database_url: str) -> None:
    db = open_database(database_url)
    try:
        problem = load_problem(SOFTMAX)
        problem_id = store.ensure_problem(db, problem)
        assert store.ensure_problem(db, problem) == problem_id
        run_id = store.create_run(db, "openai", "scripted", {"kernels": [{"path": str(SOFTMAX)}], "executor": "ray"})
        run_kernel_id = store.add_run_kernel(db, run_id, problem_id)
        assert store.add_run_kernel(db, run_id, problem_id) == run_kernel_id
        call = LLMCall(
            prompt_hash="p" * 64,
            model="scripted",
            base_url="http://127.0.0.1",
            request={"messages": [{"role": "user", "content": "hi"}]},
            response_texts=["```python\nx = 1\n```"],
            prompt_tokens=10,
            completion_tokens=5,
            latency_s=0.25,
            cost_usd=0.001,
            attempts=2,
        )
        call_id = store.add_llm_call(db, call, run_id, run_kernel_id, 1)
        store.add_llm_call(db, LLMCall("q" * 64, "scripted", "", {}, [], error="HTTP 500"), run_id, run_kernel_id, 1)
        source = "import torch\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1)\n"
        ids = [
            store.add_candidate(
                db,
                run_id=run_id,
                run_kernel_id=run_kernel_id,
                problem_id=problem_id,
                source=source if i == 0 else f"{source}\nY = {i}\n",
                baseline_source=problem.baseline_source,
                parent_id=None,
                parent_source=None,
                origin="openai",
                round=1,
                llm_call_id=call_id,
            )
            for i in range(2)
        ]
        verdict = Verdict(
            status="faster",
            correct=True,
            speedup=2.5,
            speedup_ci=[2.1, 2.9],
            problem=problem.name,
            device="cpu",
            timing=timing_record(
                2.5,
                (2.3, 2.7),
                baseline=Summary(5.0, 4.9, 5.1, 5.0, 40),
                candidate=Summary(2.0, 1.9, 2.1, 2.0, 40),
                per_shape=[shape_timing(base_ms=5.0, cand_ms=2.0)],
            ),
            environment={"device_name": "cpu", "executor": {"kind": "ray"}},
        )
        evaluation_id = store.add_evaluation(db, ids[0], verdict, 1.5)
        assert evaluation_id and store.find_candidate(db, run_kernel_id, source).id == ids[0]
        with db.session() as session:
            from kernel_agent.db.models import EvaluationRow, RunRow

            row = session.get(EvaluationRow, evaluation_id)
            assert Verdict.from_dict(row.verdict) == verdict
            assert (row.baseline_ms, row.candidate_ms, row.ci_low, row.ci_high) == (5.0, 2.0, 2.1, 2.9)
            assert session.get(RunRow, run_id).options["executor"] == "ray"
        cached = store.cached_call(db, "p" * 64)
        assert (
            cached is not None
            and cached.response_texts == call.response_texts
            and cached.attempts == 2
            and cached.request == call.request
        )
        assert store.cached_call(db, "q" * 64) is None  # failed calls are not a cache
        assert [c.prompt_hash for c in store.recorded_calls(db, run_id)] == ["p" * 64]
        assert [c.prompt_hash for c in store.recorded_calls(db, run_id, problem.name)] == ["p" * 64]
        assert store.recorded_calls(db, run_id, "no_such_kernel") == []
        store.update_run_kernel(db, run_kernel_id, status="improved", best_speedup=2.5)
        store.finish_run(db, run_id, "completed", "ok")
        assert scalar(db, "select count(*) from sources") == 4  # reference, baseline, two candidates
    finally:
        db.close()


def test_concurrent_store_writers_share_rows(database_url: str) -> None:
    """Eight writers, each with its own engine, store the same problem and source at once: one row each, no errors."""
    open_database(database_url).close()
    problem = load_problem(SOFTMAX)
    barrier, errors, problem_ids = threading.Barrier(8), [], []
    run_ids: list[int] = []

    def writer(index: int) -> None:
        db = open_database(database_url)
        try:
            barrier.wait()
            problem_id = store.ensure_problem(db, problem)
            run_id = store.create_run(db, "search", None, {})
            run_kernel_id = store.add_run_kernel(db, run_id, problem_id)
            for round_index in range(3):
                store.add_candidate(
                    db,
                    run_id=run_id,
                    run_kernel_id=run_kernel_id,
                    problem_id=problem_id,
                    source=f"SHARED = {round_index}\n",
                    baseline_source="",
                    parent_id=None,
                    parent_source=None,
                    origin="search",
                    round=round_index,
                )
            problem_ids.append(problem_id)
            run_ids.append(run_id)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(f"writer {index}: {type(exc).__name__}: {exc}")
        finally:
            db.close()

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert len(set(problem_ids)) == 1 and len(set(run_ids)) == 8
    db = open_database(database_url)
    try:
        assert scalar(db, "select count(*) from problems") == 1
        assert scalar(db, "select count(*) from sources") == 2 + 3
        assert scalar(db, "select count(*) from candidates") == 8 * 3
    finally:
        db.close()


def test_two_optimize_processes_share_one_database(database_url: str, tmp_path: Path) -> None:
    """Two real `optimize` runs start at once on one empty database: both finish, nothing duplicated or corrupt."""

    def start(index: int) -> subprocess.Popen[str]:
        args = [
            "optimize",
            str(SOFTMAX),
            "--db",
            database_url,
            "--sandbox",
            str(tmp_path / f"sandbox{index}"),
            "--threads",
            "1",
            "--rounds",
            "1",
            "--samples",
            "1",
            "--workers",
            "1",
            "--json",
        ]
        return subprocess.Popen(
            [sys.executable, "-m", "kernel_agent", *cli_args(args)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    processes = [start(0), start(1)]
    outputs = [p.communicate(timeout=300) for p in processes]
    for process, (_, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-3000:]
    assert len({json.loads(out)["run_id"] for out, _ in outputs}) == 2
    db = open_database(database_url)
    try:
        assert scalar(db, "select count(*) from problems") == 1
        assert scalar(db, "select count(*) from runs where status = 'completed'") == 2
        assert scalar(db, "select count(*) from sources") == scalar(db, "select count(distinct hash) from sources")
        assert scalar(db, "select count(*) from run_kernels") == 2
        candidates = scalar(db, "select count(*) from candidates where source_hash is not null")
        assert candidates >= 2  # each run: its baseline and at least one search candidate
        assert (
            scalar(db, "select count(*) from evaluations")
            == scalar(db, "select count(distinct candidate_id) from evaluations")
            == candidates
        )
        # Both runs proposed the same sources: stored once, referenced by both.
        assert scalar(db, "select count(*) from sources") < candidates + 2
        if db.path is not None:
            assert scalar(db, "PRAGMA integrity_check") == "ok"
    finally:
        db.close()


def test_newer_schema_is_refused(database_url: str) -> None:
    db = open_database(database_url)
    with db.engine.begin() as connection:
        connection.execute(text("update alembic_version set version_num = '9999_from_the_future'"))
    db.close()
    with pytest.raises(DatabaseError, match="newer kernel-agent"):
        open_database(database_url)
    db = open_database(database_url, migrate=False)
    try:
        assert current_revision(db.engine) == "9999_from_the_future"  # refused without being touched
    finally:
        db.close()


def test_a_finished_command_leaves_runs_db_whole(tmp_path: Path) -> None:
    """After a command that wrote ends, `runs.db` alone holds what it wrote: the WAL is folded in.

    The write is a real `review approve` (a new row in reviews); a copy of `runs.db` without its
    `-wal` and `-shm` files must still show the decision."""
    path = tmp_path / "runs.db"
    db = open_database(str(path))
    try:
        problem = load_problem(SOFTMAX)
        problem_id = store.ensure_problem(db, problem)
        run_id = store.create_run(db, "openai", "scripted", {"kernels": [{"path": str(SOFTMAX)}]})
        run_kernel_id = store.add_run_kernel(db, run_id, problem_id)
        candidate = store.add_candidate(
            db,
            run_id=run_id,
            run_kernel_id=run_kernel_id,
            problem_id=problem_id,
            source="import torch\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1)\n",
            baseline_source=problem.baseline_source,
            parent_id=None,
            parent_source=None,
            origin="openai",
            round=1,
            llm_call_id=None,
        )
    finally:
        db.close()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernel_agent",
            "review",
            "approve",
            str(candidate),
            "--note",
            "copied",
            "--db",
            str(path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    wal = path.with_name("runs.db-wal")
    assert not wal.exists() or wal.stat().st_size == 0, f"{wal.stat().st_size} bytes left in the WAL"
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy2(path, copy / "runs.db")  # the database file alone, as a user copies it
    import sqlite3

    with sqlite3.connect(copy / "runs.db") as connection:
        rows = connection.execute("select candidate_id, decision, note from reviews").fetchall()
    assert rows == [(candidate, "approve", "copied")]
