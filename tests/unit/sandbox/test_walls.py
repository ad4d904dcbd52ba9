"""The worker's walls in a real child process (never in the test's own: they cannot be lifted): what Landlock
and the seccomp filter let through and what they refuse, and that a worker with a second thread refuses them."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernel_agent.sandbox.inside import landlock, seccomp
from kernel_agent.sandbox.inside.kernel_call import one_line, refused_by_walls

CHILD = """
import errno, fcntl, json, os, socket, sys, threading
from pathlib import Path
from kernel_agent.sandbox.inside import walls
work, outside = Path(sys.argv[1]), Path(sys.argv[2])
if sys.argv[3] == "thread":
    threading.Thread(target=lambda: __import__("time").sleep(2), daemon=True).start()
shared = sys.argv[4]
raised = walls.raise_walls(work, [str(Path(shared).parent)], ("landlock-abi%d" % walls.landlock.abi(), "seccomp"))
def attempt(action):
    try:
        action()
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
def lock_twice():
    first, second = os.open(sys.argv[4], os.O_RDONLY), os.open(sys.argv[4], os.O_RDONLY)
    fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
print(json.dumps({
    "raised": raised.describe(),
    "write_work": attempt(lambda: (work / "a").write_text("x")),
    "write_outside": attempt(lambda: (outside / "a").write_text("x")),
    "read_system": attempt(lambda: open("/etc/hostname").read() if os.path.exists("/etc/hostname") else None),
    "read_outside": attempt(lambda: open(outside / "secret").read()),
    "read_shared": attempt(lambda: open(shared).read()),
    "inet": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),
    "unix": attempt(lambda: socket.socketpair()),
    "locks": attempt(lock_twice),
}))
"""


def run_child(tmp_path: Path, mode: str = "plain") -> subprocess.CompletedProcess[str]:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret").write_text("not for the sandbox")
    (tmp_path / "shared").mkdir()
    shared = tmp_path / "shared" / "shared.txt"
    shared.write_text("read by every worker")
    code = textwrap.dedent(CHILD)
    package = str(Path(landlock.__file__).parents[3])
    command = [sys.executable, "-c", code, str(work), str(outside), mode, str(shared)]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env={"PYTHONPATH": package})


@pytest.mark.skipif(not seccomp.supported() or landlock.abi() == 0, reason="no Landlock or seccomp on this machine")
def test_the_walls_keep_the_work_dir_and_refuse_the_rest(tmp_path: Path) -> None:
    done = run_child(tmp_path)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["raised"] == f"landlock-abi{landlock.abi()}, seccomp"
    assert said["write_work"] == "ok" and said["read_system"] == "ok" and said["read_shared"] == "ok"
    assert said["unix"] == "ok"
    assert said["write_outside"] == "EACCES" and said["read_outside"] == "EACCES"  # Landlock
    assert said["inet"] == "EPERM"  # seccomp
    assert said["locks"] == "ok"  # two exclusive flocks on one file: the lock holds nothing
    assert not (tmp_path / "outside" / "a").exists()


@pytest.mark.skipif(landlock.abi() == 0, reason="no Landlock on this kernel")
def test_a_second_thread_before_the_walls_is_refused(tmp_path: Path) -> None:
    done = run_child(tmp_path, "thread")
    assert done.returncode != 0 and "threads before the candidate" in done.stderr


def test_the_filter_checks_the_architecture_first_and_ends_allowing() -> None:
    for machine in ("x86_64", "aarch64"):
        code = seccomp.program(machine)
        assert code[0] == (seccomp.LD_W_ABS, 0, 0, seccomp.ARCH)
        assert code[1][3] == seccomp.AUDIT_ARCH[machine]
        assert code[-1] == (seccomp.RET, 0, 0, seccomp.RET_ALLOW)
        assert len(code) < 256  # jumps are one byte


def test_an_eperm_reason_names_the_walls() -> None:
    refused = PermissionError(errno.EPERM, "Operation not permitted")
    assert refused_by_walls(refused) and "sandbox refuses" in one_line(refused)
    try:
        try:
            raise refused
        except OSError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert refused_by_walls(wrapped)
    assert not refused_by_walls(FileNotFoundError(errno.ENOENT, "gone"))


def test_the_walls_go_up_before_anything_that_starts_a_thread() -> None:
    """numpy's OpenBLAS starts its pool at import (a thread budget of 2 made every evaluation end "2 threads
    before the candidate"): the worker's first module imports neither it nor torch before the walls."""
    code = (
        "import os, sys\n"
        "import kernel_agent.sandbox.inside.start\n"
        "print(len(os.listdir('/proc/self/task')), 'numpy' in sys.modules, 'torch' in sys.modules)\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "4", "OMP_NUM_THREADS": "4"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["1", "False", "False"], out
