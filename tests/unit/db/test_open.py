"""Opening a new SQLite file is serialised across processes: the first connection turns the file to WAL,
and two at once can deadlock in SQLite's own locks, where the busy timeout does not wait (CI's red run:
two `optimize` processes on one new runs.db, one ended "database is locked"). The race itself is rare
(4 of 20 trials with six processes: benchmarks/db_open_race.py); this test asserts the mechanism."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from kernel_agent.db.session import open_database


def test_opening_waits_for_the_folder_lock_then_opens(tmp_path: Path) -> None:
    holder = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process opening or migrating a database in this folder
    opened: list[object] = []
    thread = threading.Thread(target=lambda: opened.append(open_database(str(tmp_path / "runs.db"))), daemon=True)
    try:
        thread.start()
        thread.join(1.0)
        assert thread.is_alive() and not opened
        assert not (tmp_path / "runs.db").exists(), "connected to a new database file without the folder's lock"
    finally:
        os.close(holder)
    thread.join(30)
    assert len(opened) == 1
    opened[0].close()  # type: ignore[attr-defined]


def test_a_folder_that_cannot_be_listed_still_opens(tmp_path: Path) -> None:
    folder = tmp_path / "write-only"
    folder.mkdir()
    db = open_database(str(folder / "runs.db"))
    db.close()
    folder.chmod(0o300)  # write and search, no read: the lock cannot be taken, SQLite's locks remain
    try:
        if os.access(folder, os.R_OK):
            pytest.skip("this user reads every folder (root): no unlistable folder to open")
        db = open_database(str(folder / "runs.db"))
        db.close()
    finally:
        folder.chmod(0o700)
