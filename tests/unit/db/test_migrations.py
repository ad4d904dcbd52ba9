"""Migration 0005 (run_kernels.device) on a real SQLite file written at 0004: every row keeps its id and the
candidates pointing at it, takes the device its run's stored plan named, and a run may then hold one problem on
two devices but not twice on one."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine

from kernel_agent.db.session import _alembic_config, open_database

NOW = "2026-12-01 00:00:00"
PLANS = {
    1: {"format": 2, "kernels": [{"path": "p"}], "provider": "search", "evaluation": {"device": "cpu"}},
    2: {"kernels": [{"path": "p"}], "provider": "search", "device": "cuda"},  # format 1: the device at the top
    3: {},  # stored without a plan
}


def database_at_0004(path: Path) -> None:
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "0004")
    engine.dispose()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("INSERT INTO sources (hash, text) VALUES ('h', 'def kernel(x): return x')")
        db.execute(
            "INSERT INTO problems (id, name, kind, path, content_hash, reference_hash, baseline_hash, device, "
            f"created_at) VALUES (1, 'softmax', 'native', 'p', 'c', 'h', 'h', 'cpu', '{NOW}')"
        )
        for run_id, plan in PLANS.items():
            db.execute(
                "INSERT INTO runs (id, started_at, status, provider, options, note) "
                f"VALUES ({run_id}, '{NOW}', 'stopped', 'search', ?, '')",
                (json.dumps(plan),),
            )
            db.execute(
                "INSERT INTO run_kernels (id, run_id, problem_id, status, reason, rounds_done, duplicates) "
                f"VALUES ({10 + run_id}, {run_id}, 1, 'running', '', 1, 0)"
            )
            db.execute(
                "INSERT INTO candidates (id, run_id, run_kernel_id, problem_id, source_hash, origin, round, note, "
                f"diff_baseline, diff_parent, created_at) VALUES ({20 + run_id}, {run_id}, {10 + run_id}, 1, 'h', "
                f"'baseline', 0, '', '', '', '{NOW}')"
            )


def test_0005_gives_each_row_its_runs_device_and_keys_rows_by_device(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    database_at_0004(path)
    database = open_database(str(path))
    assert database.backup is not None and database.backup.exists()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [("0007",)]  # through to head
        assert db.execute("SELECT id, run_id, device, status FROM run_kernels ORDER BY id").fetchall() == [
            (11, 1, "cpu", "running"),
            (12, 2, "cuda", "running"),
            (13, 3, "auto", "running"),
        ]
        assert db.execute("SELECT id, run_kernel_id FROM candidates ORDER BY id").fetchall() == [
            (21, 11),
            (22, 12),
            (23, 13),
        ]
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
    with database.engine.connect() as connection:  # the migration turned them off for itself only
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1

    from kernel_agent.db.writes import add_run_kernel

    assert add_run_kernel(database, 1, 1, "cpu") == 11  # a resume finds the row the run had
    assert add_run_kernel(database, 1, 1, "cuda") not in (11, 12, 13)  # the same problem on another device
    with sqlite3.connect(path) as db, pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO run_kernels (run_id, problem_id, device, status, reason, rounds_done, duplicates) "
            "VALUES (1, 1, 'cpu', 'pending', '', 0, 0)"
        )
