"""The sweep after an evaluation: what the sandbox uid left in a shared temp folder goes, nothing else does."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kernel_agent.sandbox.host.sweep import leftovers, sweep

UID = 65534

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="making files of another uid needs root")


def owned(path: Path, uid: int = UID, folder: bool = False) -> Path:
    path.mkdir() if folder else path.write_text("x")
    os.chown(path, uid, uid)
    return path


def test_only_the_sandbox_uids_new_entries_go_wherever_it_could_write(tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    old = owned(shared / "old")  # the sandbox uid's, from before this evaluation
    time.sleep(0.05)
    since = time.time()
    time.sleep(0.05)
    mine = shared / "ours"
    mine.write_text("the trusted side's own file")
    open_folder = shared / "open"
    open_folder.mkdir()
    os.chmod(open_folder, 0o1777)  # any uid may write in it: searched
    closed = shared / "closed"
    closed.mkdir()  # only root may write in it: not searched
    inside_closed = owned(closed / "planted")
    left = [owned(shared / "file"), owned(shared / "folder", folder=True), owned(open_folder / "deep")]
    (left[1] / "inner").write_text("y")
    assert sorted(leftovers(UID, since, (shared,))) == sorted(left)
    assert sorted(sweep(UID, since, (shared,))) == sorted(left)
    assert not any(p.exists() for p in left)
    assert old.exists() and mine.exists() and open_folder.exists() and inside_closed.exists()


def test_a_sandbox_of_our_own_uid_is_never_swept(tmp_path: Path) -> None:
    since = time.time() - 1
    (tmp_path / "file").write_text("x")
    assert leftovers(os.geteuid(), since, (tmp_path,)) == []
