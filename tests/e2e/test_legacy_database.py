"""A database written by the flat-layout code (5dcc3dc, the last commit before the house was rebuilt)
reads back with the same verdicts: the stored JSON kept its fields."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from kernel_agent.core.verdict import Status, Verdict
from kernel_agent.db.session import open_database

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy" / "runs-5dcc3dc.db"


def test_every_stored_verdict_decodes_to_its_stored_status(tmp_path: Path) -> None:
    db_path = tmp_path / "runs.db"
    shutil.copy(LEGACY, db_path)
    with sqlite3.connect(db_path) as connection:
        before = connection.execute("select id, status, verdict from evaluations order by id").fetchall()
    assert {row[1] for row in before} >= {"correct", "flagged", "incorrect"}
    open_database(str(db_path))  # migrates (after a backup) if the schema moved on
    with sqlite3.connect(db_path) as connection:
        after = connection.execute("select id, status, verdict from evaluations order by id").fetchall()
    assert [(i, s) for i, s, _ in after] == [(i, s) for i, s, _ in before]
    for _id, status, stored in after:
        verdict = Verdict.from_dict(json.loads(stored))
        assert verdict.status == status and Status(verdict.status).value == status
        old = json.loads(stored)
        assert verdict.speedup == old["speedup"] and verdict.reason == old["reason"]
        assert set(old) <= set(verdict.to_dict())  # every field today's code wrote is still there
