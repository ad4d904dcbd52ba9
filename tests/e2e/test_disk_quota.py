"""A sandbox's total disk use is bounded (issue 11, class D): the scratch folders are one
size-limited tmpfs under bwrap, and `disk_overuse` measures what the sandbox uid wrote in the work
dir from outside (the bound for the levels without a tmpfs)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernel_agent.sandbox.host.isolation import (
    MB,
    SANDBOX_UID,
    SANDBOX_WRITABLE,
    Limits,
    disk_overuse,
    disk_use,
    prepare_workdir,
    sandbox_env,
    wrap,
)
from kernel_agent.sandbox.host.levels import probe

ME = os.geteuid()


def workdir(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    prepare_workdir(folder, ME)
    return folder


def write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        for _ in range(size // MB):
            handle.write(b"\x11" * MB)


def test_writable_folders_are_summed_and_the_reason_names_the_quota(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    for index in range(3):
        write(work / "scratch" / "home" / f"part{index}", 2 * MB)
    write(work / "scratch" / "home" / "deep" / "er" / "file", 2 * MB)
    used, _files = disk_use(work, uid=ME)
    assert 8 * MB <= used < 9 * MB
    assert disk_overuse(work, 16 * MB, uid=ME) is None
    assert disk_overuse(work, 5 * MB, uid=ME) == "disk quota of 5 MB exceeded: 8 MB written"


def test_trusted_files_outside_the_writable_folders_do_not_count_for_the_same_uid(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    write(work / "cases" / "0.in", 4 * MB)  # the trusted side's inputs
    assert disk_use(work, uid=ME)[0] < MB


@pytest.mark.skipif(ME != 0, reason="ownership separates the sandbox's files only when it runs as another uid")
def test_files_the_sandbox_uid_owns_anywhere_in_the_work_dir_count(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    log = work / "candidate.log"
    write(log, 3 * MB)
    os.chown(log, SANDBOX_UID, SANDBOX_UID)
    write(work / "cases" / "0.in", 4 * MB)
    used, _ = disk_use(work, uid=SANDBOX_UID)
    assert 3 * MB <= used < 4 * MB


def test_sparse_files_count_what_was_filled_and_hard_links_once(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    sparse = work / "scratch" / "tmp" / "sparse"
    with open(sparse, "wb") as handle:
        handle.truncate(1 << 34)  # 16 GB apparent, nothing allocated
    assert disk_use(work, uid=ME)[0] < MB
    with open(sparse, "r+b") as handle:
        handle.seek(1 << 33)
        handle.write(b"\x22" * (3 * MB))
        handle.flush()
        os.fsync(handle.fileno())
    os.link(sparse, work / "scratch" / "home" / "same-inode")
    used, _ = disk_use(work, uid=ME)
    assert 3 * MB <= used < 4 * MB


def test_symlinks_are_not_followed(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    outside = tmp_path / "big"
    write(outside, 8 * MB)
    (work / "scratch" / "home" / "link").symlink_to(outside)
    (work / "scratch" / "home" / "loop").symlink_to(work)
    assert disk_use(work, uid=ME)[0] < MB


def test_a_flood_of_empty_files_is_over_the_quota(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    for index in range(60):
        (work / "scratch" / "home" / f"f{index}").touch()
    assert (
        disk_overuse(work, 1 << 30, uid=ME, max_files=50)
        == "disk quota of 50 files exceeded: more than 50 files written"
    )
    assert disk_overuse(work, 1 << 30, uid=ME, max_files=100) is None


def test_a_missing_or_vanishing_work_dir_is_no_error(tmp_path: Path) -> None:
    assert disk_overuse(tmp_path / "gone", 1, uid=ME) is None


def test_the_layout_puts_home_tmpdir_and_caches_in_scratch(tmp_path: Path) -> None:
    work = workdir(tmp_path)
    env = sandbox_env({}, work)
    for key in ("HOME", "TMPDIR", "XDG_CACHE_HOME"):
        assert Path(env[key]).parent == work / "scratch" and Path(env[key]).is_dir()
    assert all((work / name).is_dir() for name in SANDBOX_WRITABLE)


BWRAP = probe()
needs_tmpfs = pytest.mark.skipif(not BWRAP.scratch_tmpfs, reason="needs bubblewrap with --size")


@needs_tmpfs
def test_the_scratch_tmpfs_bounds_the_sum_of_home_tmpdir_and_caches(tmp_path: Path) -> None:
    """In the real sandbox: 3 MB in each of HOME, TMPDIR and the cache under an 8 MB quota; the
    third write fails with ENOSPC, the host's scratch folder stays empty."""
    work = workdir(tmp_path)
    isolation = BWRAP.with_limits(Limits(disk_bytes=8 * MB))
    script = (
        "import os\nfor key in ('HOME', 'TMPDIR', 'XDG_CACHE_HOME'):\n    try:\n"
        "        open(os.path.join(os.environ[key], 'blob'), 'wb').write(b'x' * (3 << 20)); print(key, 'ok')\n"
        "    except OSError as exc:\n        print(key, exc)\n"
    )
    proc = subprocess.run(
        wrap([sys.executable, "-c", script], isolation, work),
        env=sandbox_env({}, work),
        cwd=work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["HOME ok", "TMPDIR ok", "XDG_CACHE_HOME [Errno 28] No space left on device"], (
        proc.stdout
    )
    assert disk_use(work, uid=SANDBOX_UID if ME == 0 else ME)[0] < MB
    assert not any(p.is_file() for p in (work / "scratch").rglob("*"))


@needs_tmpfs
def test_wrap_takes_the_quota_from_its_argument_or_the_isolation() -> None:
    work = Path("/nonexistent-work")
    assert "--size" in wrap(["true"], BWRAP, work) and str(BWRAP.disk_bytes) in wrap(["true"], BWRAP, work)
    assert str(5 * MB) in wrap(["true"], BWRAP, work, disk_bytes=5 * MB)
    assert "--size" not in wrap(["true"], probe("process"), work)


def test_the_verdicts_isolation_line_names_the_quota() -> None:
    isolation = probe().with_limits(Limits(disk_bytes=256 * MB))
    text = isolation.describe()
    assert "disk quota 256 MB" in text
    if isolation.scratch_tmpfs:
        assert "No space left on device" in text
    assert "disk quota 1024 MB (checked on the work dir from outside)" in probe("process").describe()


def test_without_a_tmpfs_the_watchdog_stops_a_flood_with_the_quota_in_the_reason(tmp_path: Path) -> None:
    """The unshare level has no size-limited scratch: the session's disk watchdog bounds it from outside."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from adversarial.common import all_fixtures, run_fixture

    fixture = next(f for f in all_fixtures() if f.name == "d51_many_files")
    # Without bwrap the sandbox uid walks the real file system: its work dirs need traversable parents.
    sandbox_root = Path(tempfile.mkdtemp(prefix="ka-unshare-", dir="/tmp"))
    os.chmod(sandbox_root, 0o755)
    try:
        started = time.monotonic()
        verdict = run_fixture(fixture, sandbox_root, isolation="unshare", limits=Limits(disk_bytes=64 * MB))
        assert verdict.status == "crashed", verdict.reason
        assert "disk quota of 64 MB exceeded" in verdict.reason
        assert time.monotonic() - started < 60
        assert not list(sandbox_root.glob("*/")), "the work dir was not removed"
    finally:
        shutil.rmtree(sandbox_root, ignore_errors=True)
