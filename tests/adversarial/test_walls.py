"""The walls at each isolation level: candidates that reach outside the sandbox (files, network, other
processes, kernel calls, and class F's rendezvous through something shared) through the real evaluation path,
each at every level that starts here, bwrap hidden or not. The fixture reports each attempt; here, every one
must have failed, and the host side must show nothing: no file, no connection, no signal."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from adversarial.common import FIXTURES, ROOT, load_fixture, run_fixture
from kernel_agent.sandbox.host.levels import attempt

LEVELS = ("bwrap", "unshare", "process")


def level_or_skip(level: str) -> str:
    tried = attempt(level)
    if not tried.works:
        pytest.skip(f"{level} does not start here: {tried.why}")
    return level


def held(verdict) -> list[str]:
    """The attempts the fixture reported, asserting each was refused."""
    assert verdict.status == "runtime_error", f"{verdict.status}: {verdict.reason}"
    assert "walls:" in verdict.reason, verdict.reason
    attempts = list(itertools.takewhile(re.compile(r"\w+=\w+").fullmatch, verdict.reason.split("walls:", 1)[1].split()))
    assert attempts, verdict.reason
    breached = [a for a in attempts if a.endswith("=ok")]
    assert not breached, f"walls breached: {breached} ({verdict.reason})"
    return attempts


@pytest.mark.parametrize("level", LEVELS)
def test_no_write_outside_the_work_dir(tmp_path: Path, level: str) -> None:
    level_or_skip(level)
    target = tmp_path / "target"
    target.mkdir()
    os.chmod(target, 0o777)  # writable by the sandbox uid: only the walls stand in the way
    fixture = load_fixture(FIXTURES / "w4_walls_write_outside.py")
    problem_dir = fixture.problem
    problem_stat = problem_dir.stat()
    before = {p.name for folder in ("/tmp", "/var/tmp", "/dev/shm") for p in Path(folder).glob("ka-wall-*")}
    dirs = json.dumps([str(target), str(problem_dir)])
    verdict = run_fixture(fixture, tmp_path / "sandbox", {"DIRS": dirs}, isolation=level)
    attempts = held(verdict)
    assert len(attempts) >= 20, attempts
    assert not list(target.iterdir())
    assert target.stat().st_mode & 0o7777 == 0o777 and target.stat().st_mtime > 0  # no chmod, no utime
    assert (problem_dir.stat().st_mode, problem_dir.stat().st_mtime) == (problem_stat.st_mode, problem_stat.st_mtime)
    assert not list(problem_dir.glob("ka-wall-*"))
    after = {p.name for folder in ("/tmp", "/var/tmp", "/dev/shm") for p in Path(folder).glob("ka-wall-*")}
    assert after == before
    assert not Path("/dev/shm/sem.ka-rendezvous").exists()


@pytest.mark.parametrize("level", LEVELS)
def test_no_network(tmp_path: Path, level: str) -> None:
    level_or_skip(level)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    port = listener.getsockname()[1]
    udp.bind(("127.0.0.1", port))
    udp.settimeout(0.2)
    reached: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for how, receive in (("tcp", listener.accept), ("udp", lambda: udp.recvfrom(100))):
                try:
                    receive()
                    reached.append(how)
                except OSError:
                    pass

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        fixture = load_fixture(FIXTURES / "w4_walls_network.py")
        verdict = run_fixture(fixture, tmp_path / "sandbox", {"PORT": str(port)}, isolation=level)
    finally:
        stop.set()
        watcher.join()
        listener.close()
        udp.close()
    assert len(held(verdict)) == 6
    assert not reached


@pytest.mark.parametrize("level", LEVELS)
def test_no_reach_into_other_processes(tmp_path: Path, level: str) -> None:
    level_or_skip(level)
    # A process outside the sandbox, as the sandbox uid where the sandbox drops to one: only the walls stand
    # between them (same uid: permissions allow the signal, the trace and the environment read).
    user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    outside = subprocess.Popen([*user, "sleep", "120"], env={"KA_SECRET": "s3cret", "PATH": os.environ["PATH"]})
    name = f"ka-walls-{os.getpid()}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind("\0" + name)
    abstract.listen()
    abstract.settimeout(0.2)
    try:
        fixture = load_fixture(FIXTURES / "w4_walls_processes.py")
        params = {"PID": str(outside.pid), "SOCKET": name}
        verdict = run_fixture(fixture, tmp_path / "sandbox", params, isolation=level)
        with pytest.raises(OSError):
            abstract.accept()
        assert outside.poll() is None, "the outside process was killed"
    finally:
        outside.send_signal(signal.SIGKILL)
        outside.wait()
        abstract.close()
    assert "s3cret" not in verdict.reason
    assert len(held(verdict)) == 7


@pytest.mark.parametrize("level", LEVELS)
def test_no_kernel_calls_no_worker_needs(tmp_path: Path, level: str) -> None:
    level_or_skip(level)
    verdict = run_fixture(load_fixture(FIXTURES / "w4_walls_kernel_calls.py"), tmp_path / "sandbox", isolation=level)
    assert len(held(verdict)) == 9


@pytest.mark.parametrize("level", LEVELS)
def test_no_rendezvous_between_processes(tmp_path: Path, level: str) -> None:
    level_or_skip(level)
    fixture = load_fixture(FIXTURES / "w4_rendezvous.py")
    shared = ROOT / "kernel_agent" / "__init__.py"  # every worker of every verdict reads it
    verdict = run_fixture(fixture, tmp_path / "sandbox", {"SHARED": str(shared)}, isolation=level)
    assert len(held(verdict)) == 7


@pytest.mark.parametrize("level", LEVELS)
def test_the_compiler_reads_no_secret(tmp_path: Path, level: str) -> None:
    level_or_skip(level)
    secret = tmp_path / "secret.h"
    secret.write_text("sk-only-root-may-read-this\n")
    os.chmod(secret, 0o600)
    os.chmod(tmp_path, 0o755)  # only the file's own mode stands in the way
    fixture = load_fixture(FIXTURES / "w4_include_secret.py")
    verdict = run_fixture(fixture, tmp_path / "sandbox", {"SECRET": str(secret)}, isolation=level)
    assert verdict.status == "compile_error", verdict.reason
    assert "sk-only-root" not in verdict.to_json()
    # Read, the file's text is a C++ error of its own ("'sk' does not name a type"); refused, it is never opened.
    assert "does not name a type" not in verdict.reason
    assert "Permission denied" in verdict.reason or "No such file" in verdict.reason, verdict.reason
