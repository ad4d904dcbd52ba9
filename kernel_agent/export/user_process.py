"""A process that looks like a user's, for code that must be run outside the sandbox: the export's last check of
a winner and `verify-package`'s call through the package's own loader.

Why it must look like a user's: code that is honest only while it is evaluated reads `faster` in every verdict,
so the run that decides whether it ships must give it nothing to key on: a temporary folder named as Python names
them (no tool name), a driver script `main.py` run with no arguments, inputs on its standard input (no cases
file to read ahead), the user's environment less kernel-agent's variables and secrets, a parent shell rather
than kernel-agent (the shell is orphaned, so its parent is init), and no kernel-agent module loaded before the
code is. The driver announces that the code is loaded before any input exists; the caller draws its inputs
from fresh seeds only then, and draws them again for a second round, so code that keys on the first inputs it
sees is caught.

Why it must not run as this process: the code is a candidate's, and as root with the venv writable one `.pth`
file in site-packages would control every later verdict. As root it runs as an unused uid of the user range (not
the sandbox's 65534, which is itself a sign of evaluation; drawn afresh for each run, so whatever runs or lies
about as that uid afterwards is this run's: killed and swept from the shared temp folders at the end), in a mount
namespace of its own when the interpreter sits under a private folder (sandbox/host/reveal.py shows it the
needed trees, read-only). As another user it runs as that user (THREATS names the gap).
"""

from __future__ import annotations

import functools
import os
import pwd
import secrets
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from kernel_agent.sandbox.host.isolation import SANDBOX_UID, needed_read_paths, traversable
from kernel_agent.sandbox.host.sweep import sweep

SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "DATABASE_URL", "CREDENTIAL")
FRAME = struct.Struct("<Q")
USER_UIDS = range(2000, 60000)  # ordinary accounts' uids, clear of the first few a machine hands out
MAX_FRAME = 4 << 30

# The driver's half of the protocol, shared by every main.py: frames of (u64 length, bytes) on its own copies
# of stdin and stdout; the code's prints go to stderr. A frame of length 0 ends it.
SERVE = r"""
import io
import os
import struct
import sys

import torch

# An editable install's import hooks are no part of what a user of a built package has.
sys.path[:] = [p for p in sys.path if not p.startswith("__editable__")]
sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
sys.path_hooks[:] = [h for h in sys.path_hooks if not getattr(h, "__module__", "").startswith("__editable__")]
for _name in [m for m in sys.modules if m.startswith("__editable__")]:
    del sys.modules[_name]
sys.path_importer_cache.clear()
_frame = struct.Struct("<Q")
_in = os.fdopen(os.dup(0), "rb", buffering=0)
_out = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)


def _read(n):
    data = b""
    while len(data) < n:
        chunk = _in.read(n - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data


def _send(value):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    data = buffer.getvalue()
    _out.write(_frame.pack(len(data)) + data)


def serve(loaded, call):
    _send(loaded)
    while True:
        (n,) = _frame.unpack(_read(_frame.size))
        if n == 0:
            return
        _send(call(torch.load(io.BytesIO(_read(n)))))
"""


class UserProcessError(Exception):
    """The process ended, hung or answered nothing readable: one line."""


def user_env(folder: Path) -> dict[str, str]:
    """The user's environment less kernel-agent's variables, anything named like a secret and bash's `_` (the
    command that started the tool); HOME and the working directory are the run's own folder (nothing the tool
    reads later). PATH and PYTHONPATH stay: the user's own processes have them too."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("KERNEL_AGENT_")
        and not any(word in key.upper() for word in SECRET_WORDS)
        and key not in ("_", "OLDPWD", "PWD", "HOME", "TMPDIR", "XDG_CACHE_HOME")
    }
    env.update({"HOME": str(folder), "PWD": str(folder)})
    return env


def user_uid() -> int | None:
    """As root: a uid of the user range with no account here, drawn at random for each run so that no other run
    (another export beside this one) shares it and everything it owns is this run's; None when not root (the
    run keeps this process's uid)."""
    if os.geteuid() != 0:
        return None
    taken = {entry.pw_uid for entry in pwd.getpwall()} | {SANDBOX_UID}
    while True:
        uid = secrets.choice(USER_UIDS)
        if uid not in taken:
            return uid


def privileges(uid: int | None, extra: tuple[Path, ...] = ()) -> list[str]:
    """The launch prefix for `uid`: a mount namespace that reveals trees under a private folder (only when one
    hides them: the interpreter, site-packages, this package, `extra`), then the switch to the uid with no
    capabilities left."""
    if uid is None:
        return []
    hidden = [str(p) for p in needed_read_paths(extra) if not traversable(p)]
    if hidden and not _mount_namespaces():
        raise UserProcessError(
            f"cannot run as an unprivileged user here: {hidden[0]} sits below a private folder and this machine "
            "allows no mount namespace to show it (make the folders above it o+x, or run kernel-agent as a user)"
        )
    reveal = ["unshare", "--mount", sys.executable, "-I", "-S", str(_reveal_script()), *hidden, "--"]
    setpriv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all"]
    return (reveal if hidden else []) + setpriv + ["--bounding-set=-all", "--no-new-privs"]


@functools.cache
def _mount_namespaces() -> bool:
    try:
        return subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def end_uid(uid: int, since: float) -> None:
    """A run's own uid at its end: every process of it killed, what it left in the shared temp folders since
    `since` (a time.time() value) removed."""
    kill_uid(uid)
    sweep(uid, since)


def kill_uid(uid: int) -> None:
    """Kill every process of `uid` (a run's own uid: what it started, escaped from its process group too)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid == uid:
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


def _reveal_script() -> Path:
    from kernel_agent.sandbox.host import isolation

    return Path(isolation.__file__).with_name("reveal.py")


def _quote(parts: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(p) for p in parts)


class UserProcess:
    """`main.py` (its driver text, ending in a call to `serve`) and `files` in a fresh folder, started as a user
    would start it. `loaded()` waits for the driver's first frame; `ask()` sends one frame and reads the reply;
    leaving the `with` block kills what is left, sweeps what its uid left in the shared temp folders and removes
    the folder."""

    def __init__(
        self,
        driver: str,
        files: dict[str, str],
        timeout: float,
        env: dict[str, str] | None = None,
        prepare: Callable[[Path], object] | None = None,
    ) -> None:
        self.driver, self.files, self.timeout, self.extra_env = driver, files, timeout, env or {}
        self.prepare = prepare  # writes more into the folder before the process starts (may raise)
        self.folder = Path(tempfile.mkdtemp())
        self.uid = user_uid()
        self.deadline = time.monotonic() + timeout
        self.group: int | None = None
        self.stderr_path = Path(tempfile.mkstemp()[1])  # outside the run's folder, written through a descriptor

    def __enter__(self) -> UserProcess:
        self.started = time.time() - 1.0
        for name, content in self.files.items():
            target = self.folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        if self.prepare is not None:
            try:
                self.prepare(self.folder)
            except BaseException:
                self._remove()
                raise
        (self.folder / "main.py").write_text(SERVE + self.driver)
        os.chmod(self.folder, 0o755)
        if self.uid is not None:
            for path in (self.folder, *self.folder.rglob("*")):
                os.chown(path, self.uid, self.uid, follow_symlinks=False)
        try:
            self._start()
        except BaseException:
            self._remove()
            raise
        return self

    def _start(self) -> None:
        to_child, self.writer = os.pipe()
        self.reader, from_child = os.pipe()
        self.status, status_w = os.pipe()
        shell = shutil.which("bash") or "/bin/sh"
        # The inner shell is the driver's parent; the outer one exits at once, so the inner one's parent is init
        # and kernel-agent is no ancestor the code can read. (A background job's stdin is /dev/null unless it
        # is given another descriptor: the pipe goes through `saved`.)
        run = f"{_quote([sys.executable, 'main.py'])} {status_w}>&-; echo $? >&{status_w}"
        inner = _quote([*privileges(self.uid), shell, "-c", run])  # each step execs the next: one process
        saved = status_w + 1  # the outer shell's only descriptors are 0, 1, 2 and status_w
        stderr = os.open(self.stderr_path, os.O_WRONLY | os.O_APPEND)
        try:
            outer = subprocess.Popen(
                [shell, "-c", f"exec {saved}<&0; {inner} <&{saved} {saved}<&- &"],
                stdin=to_child,
                stdout=from_child,
                stderr=stderr,
                cwd=self.folder,
                env={**user_env(self.folder), **self.extra_env},
                pass_fds=(status_w,),
                start_new_session=True,
            )
        finally:
            for fd in (to_child, from_child, status_w, stderr):
                os.close(fd)
        outer.wait()
        self.group = outer.pid  # the session's process group outlives its leader while a member lives

    def _wait(self, fd: int) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise UserProcessError(f"did not finish within {self.timeout:.0f} s")

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            self._wait(self.reader)
            chunk = os.read(self.reader, min(n - len(data), 1 << 20))
            if not chunk:
                raise UserProcessError(self.ended())
            data += chunk
        return data

    def ended(self) -> str:
        """Why the process stopped answering: its exit status and the last line it wrote to stderr."""
        try:
            self._wait(self.status)
            code = os.read(self.status, 64).decode(errors="replace").strip() or "unknown"
        except UserProcessError:
            code = "unknown"
        lines = self.stderr_path.read_text(errors="replace").strip().splitlines() or ["no output"]
        return f"failed (exit {code}): {lines[-1][:200]}"

    def loaded(self) -> bytes:
        """The driver's first frame, sent once the code is imported and before any input exists."""
        return self._frame()

    def ask(self, payload: bytes) -> bytes:
        data = FRAME.pack(len(payload)) + payload
        try:
            while data:
                left = self.deadline - time.monotonic()
                if left <= 0 or not select.select([], [self.writer], [], left)[1]:
                    raise UserProcessError(f"did not finish within {self.timeout:.0f} s")
                data = data[os.write(self.writer, data[: 1 << 20]) :]
        except BrokenPipeError:
            raise UserProcessError(self.ended()) from None
        return self._frame()

    def _frame(self) -> bytes:
        (n,) = FRAME.unpack(self._read(FRAME.size))
        if n > MAX_FRAME:
            raise UserProcessError(f"answered a frame of {n} bytes")
        return self._read(n)

    def __exit__(self, *exc: object) -> None:
        try:
            os.write(self.writer, FRAME.pack(0))
        except OSError:
            pass
        for fd in (self.writer, self.reader, self.status):
            os.close(fd)
        if self.group is not None:
            try:
                os.killpg(self.group, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.uid is not None:
            end_uid(self.uid, self.started)
        self._remove()

    def _remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.stderr_path.unlink(missing_ok=True)
