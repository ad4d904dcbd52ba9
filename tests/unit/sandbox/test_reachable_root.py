"""Where work dirs go when the sandbox runs as another uid without bwrap's binds (sandbox/isolation.py)."""

from __future__ import annotations

import os
from pathlib import Path

from kernel_agent.sandbox.host.isolation import Isolation, reachable_root, traversable, write_trusted

OTHER_UID = 65534 if os.geteuid() != 65534 else 65533


def test_a_private_folder_above_the_root_sends_work_dirs_to_a_passable_one(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir()
    os.chmod(private, 0o700)
    chosen = reachable_root(private / "sandbox", Isolation("unshare", OTHER_UID))
    assert chosen != (private / "sandbox").resolve()
    assert traversable(chosen) and chosen.stat().st_mode & 0o777 == 0o711


def test_a_passable_root_is_kept(tmp_path: Path) -> None:
    open_dir = Path("/tmp") / f"ka-reachable-{os.getpid()}"
    open_dir.mkdir(exist_ok=True)
    os.chmod(open_dir, 0o755)
    try:
        if traversable(open_dir):  # /tmp itself may be private in some containers
            assert reachable_root(open_dir / "sandbox", Isolation("process", OTHER_UID)) == open_dir / "sandbox"
    finally:
        (open_dir / "sandbox").rmdir()
        open_dir.rmdir()


def test_bwrap_and_the_same_uid_keep_the_root_whatever_its_parents(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir()
    os.chmod(private, 0o700)
    assert reachable_root(private / "s", Isolation("bwrap", OTHER_UID)) == (private / "s").resolve()
    assert reachable_root(private / "s", Isolation("unshare", os.geteuid())) == (private / "s").resolve()
    assert not traversable(private / "s")


def test_trusted_files_are_readable_by_the_sandbox_under_umask_077(tmp_path: Path) -> None:
    old = os.umask(0o077)
    try:
        write_trusted(tmp_path / "cand.json", b"{}")
    finally:
        os.umask(old)
    assert (tmp_path / "cand.json").stat().st_mode & 0o777 == 0o644
