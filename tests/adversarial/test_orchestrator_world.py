"""Faults in the orchestrator's world: files next to the run, the database, secrets, network,
cross-run replay, and writes the trusted side makes through names the candidate planted."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

from adversarial.common import FIXTURES, ROOT, load_fixture, run_fixture, sandbox_processes

SECRET = "sk-PLANTED-" + uuid.uuid4().hex


def make_db(path: Path) -> str:
    with sqlite3.connect(path) as db:
        db.execute("create table runs (id integer primary key, verdict text)")
        db.executemany("insert into runs (verdict) values (?)", [(f"v{i}",) for i in range(100)])
    return digest(path)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def db_ok(path: Path) -> bool:
    with sqlite3.connect(path) as db:
        return db.execute("pragma integrity_check").fetchone()[0] == "ok"


def tree(folder: Path, skip: Path | None = None) -> dict[str, tuple[str, int, int, int]]:
    """Every entry under `folder`: kind, mode, owner and content hash."""
    seen = {}
    for path in sorted(folder.rglob("*")):
        if skip is not None and (path == skip or skip in path.parents):
            continue
        info = path.lstat()
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
        content = digest(path) if kind == "file" else (os.readlink(path) if kind == "link" else "")
        seen[str(path.relative_to(folder))] = (
            f"{kind}:{content}",
            info.st_mode,
            info.st_uid,
            info.st_size if kind == "file" else 0,
        )
    return seen


def test_writes_outside_the_work_dir_fail_and_leave_everything_untouched(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "0123.so").write_bytes(b"trusted build")
    db = tmp_path / "runs.db"
    make_db(db)
    (tmp_path / "notes.txt").write_text("orchestrator data")
    repo_target = ROOT / "tests" / "adversarial" / f".target-{uuid.uuid4().hex}"
    repo_target.write_text("repo file")
    try:
        targets = [str(repo_target), str(tmp_path / "notes.txt"), str(db), str(store / "0123.so")]
        before, repo_before = tree(tmp_path, skip=tmp_path / "sandbox"), tree(ROOT / "kernel_agent")
        fixture = load_fixture(FIXTURES / "c37_write_outside.py")
        verdict = run_fixture(fixture, tmp_path / "sandbox", {"TARGETS": json.dumps(targets)}, build_store=store)
        assert verdict.status == "runtime_error", verdict.reason
        assert "write attempts:" in verdict.reason and "=ok" not in verdict.reason, verdict.reason
        assert tree(tmp_path, skip=tmp_path / "sandbox") == before
        assert tree(ROOT / "kernel_agent") == repo_before
        assert repo_target.read_text() == "repo file" and not (repo_target.parent / "planted-by-candidate").exists()
        assert db_ok(db)
    finally:
        repo_target.unlink()


def test_planted_symlinks_cannot_redirect_the_trusted_sides_writes(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    db_hash = make_db(db)
    other = tmp_path / "config.toml"
    other.write_text("keep me")
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "table.md").write_text("| a | b |")
    before = tree(tmp_path, skip=tmp_path / "sandbox")
    fixture = load_fixture(FIXTURES / "c37_symlink_clobber.py")
    verdict = run_fixture(fixture, tmp_path / "sandbox", {"TARGETS": json.dumps([str(db), str(other), str(folder)])})
    assert verdict.status in ("faster", "flagged", "correct"), verdict.reason
    assert digest(db) == db_hash and db_ok(db)
    assert tree(tmp_path, skip=tmp_path / "sandbox") == before


def test_the_database_next_to_the_run_survives_every_hostile_candidate(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    db_hash = make_db(db)
    for name in ("c43_fork_bomb_setsid.py", "c35_os_exit_call.py", "a36_patch_torch_equal.py", "c16_file_replay.py"):
        run_fixture(load_fixture(FIXTURES / name), tmp_path / "sandbox")
        assert digest(db) == db_hash and db_ok(db), name
    assert not sandbox_processes(tmp_path / "sandbox")


def test_a_planted_secret_appears_nowhere(tmp_path: Path) -> None:
    """The orchestrator's environment holds an API key and a database URL; the candidate hunts for them."""
    sandbox = tmp_path / "sandbox"
    script = (
        "import sys; sys.path.insert(0, {!r})\n"
        "from pathlib import Path\n"
        "from adversarial.common import FIXTURES, load_fixture, run_fixture\n"
        "v = run_fixture(load_fixture(FIXTURES / 'c15_read_environ.py'), Path({!r}), keep_workdir=True)\n"
        "print(v.to_json())\n"
    ).format(str(ROOT / "tests"), str(sandbox))
    env = {
        **os.environ,
        "OPENAI_API_KEY": SECRET,
        "KERNEL_AGENT_DB": f"sqlite:///{tmp_path}/{SECRET}.db",
        "SECRET_TOKEN": SECRET,
    }
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    verdict = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdict["status"] == "runtime_error" and "secrets found: none" in verdict["reason"], verdict["reason"]
    assert SECRET not in proc.stdout and SECRET not in verdict["candidate_output"]
    files = [p for p in sandbox.rglob("*") if p.is_file() and not p.is_symlink()]
    assert files, "keep_workdir should have kept the work dir"
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path


def test_no_network_from_the_sandbox(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    try:
        fixture = load_fixture(FIXTURES / "c38_network.py")
        verdict = run_fixture(fixture, tmp_path / "sandbox", {"PORT": str(port)})
        assert verdict.status == "runtime_error", verdict.reason
        assert "network attempts:" in verdict.reason and "connected" not in verdict.reason, verdict.reason
        try:
            listener.accept()
            raise AssertionError("the sandbox reached a loopback service of the orchestrator")
        except TimeoutError:
            pass
    finally:
        listener.close()


def test_no_replay_cache_survives_between_runs(tmp_path: Path) -> None:
    fixture = load_fixture(FIXTURES / "c16_file_replay.py")
    for _ in range(2):
        verdict = run_fixture(fixture, tmp_path / "sandbox")
        assert verdict.status == "runtime_error" and "replay cache: none found" in verdict.reason, verdict.reason
