"""The trusted side's handle on one sandboxed worker process.

Owns the process for its whole life: starts it under the isolation layer,
talks to it with deadlines, and kills every process it started (the process
group, and with bwrap the PID namespace) on timeout, error or exit.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_agent.sandbox import channel
from kernel_agent.sandbox.isolation import Isolation, Limits, prepare_workdir, sandbox_env, sandbox_writable_dir, wrap, write_trusted
from kernel_agent.sandbox.worker import FD_IN, FD_OUT

LOG_TAIL_BYTES = 4000


class WorkerFailure(Exception):
    """The worker ended the exchange with a verdict-worthy status."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class WorkerSpec:
    role: str  # "candidate" or "baseline"
    source: Path  # the module to import inside the sandbox
    entry: str  # "kernel", "ModelNew" or "Model"
    device: str
    threads: int
    env: dict[str, str]
    extra_ro: tuple[Path, ...] = ()
    init_file: str | None = None
    state_file: str | None = None
    masked: tuple[Path, ...] = ()  # hidden from the worker (bwrap only)


class WorkerSession:
    def __init__(self, spec: WorkerSpec, workdir: Path, isolation: Isolation, limits: Limits, deadline: float) -> None:
        self.spec = spec
        self.workdir = workdir
        self.isolation = isolation
        self.deadline = deadline
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at = time.monotonic()
        self.limits = limits

    # ---- lifecycle ---------------------------------------------------------
    def start(self) -> None:
        spec = self.spec
        config = {
            "workdir": str(self.workdir),
            "role": spec.role,
            "source": str(spec.source),
            "entry": spec.entry,
            "device": spec.device,
            "threads": spec.threads,
            "init_file": spec.init_file and str(self.workdir / spec.init_file),
            "state_file": spec.state_file and str(self.workdir / spec.state_file),
        }
        prepare_workdir(self.workdir, self.isolation.uid)
        # Trusted files are created afresh (never through a name the sandbox could have planted).
        config_path = self.workdir / f"{spec.role}.json"
        write_trusted(config_path, json.dumps(config).encode())
        write_trusted(self.workdir / f"{spec.role}.log", b"", owner=self.isolation.uid)
        for value in spec.env.values():  # per-candidate caches (Triton, torch extensions) inside the work dir
            path = Path(value)
            if path.is_absolute() and self.workdir in path.parents:
                sandbox_writable_dir(path, self.isolation.uid)
        sandbox_log = self.workdir / f"{spec.role}.sandbox.log"
        write_trusted(sandbox_log, b"")
        # Parent -> worker on FD_IN, worker -> parent on FD_OUT.
        to_worker_r, self.to_worker = os.pipe()
        self.from_worker, from_worker_w = os.pipe()
        # -P: the work dir (cwd) is never on sys.path, so nothing planted there is imported.
        command = wrap(
            [sys.executable, "-P", "-s", "-B", "-m", "kernel_agent.sandbox.worker", str(config_path)],
            self.isolation,
            self.workdir,
            extra_ro=spec.extra_ro,
            masked=spec.masked,
            gpu=spec.device == "cuda",
        )
        package_root = str(Path(__file__).resolve().parents[2])
        env = sandbox_env({"PYTHONPATH": package_root, **spec.env}, self.workdir)
        limits = self.limits

        cpus = timing_cpus(spec.threads) if spec.device == "cpu" else None

        def before_exec() -> None:
            # Move both ends above the target numbers first so the dup2s cannot clobber each other.
            high_r = fcntl.fcntl(to_worker_r, fcntl.F_DUPFD, 100)
            high_w = fcntl.fcntl(from_worker_w, fcntl.F_DUPFD, 100)
            os.dup2(high_r, FD_IN)
            os.dup2(high_w, FD_OUT)
            limits.apply()
            if cpus:
                os.sched_setaffinity(0, cpus)
            _same_layout()

        stderr_fd = os.open(sandbox_log, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            self.process = subprocess.Popen(
                command,
                env=env,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr_fd,
                pass_fds=(FD_IN, FD_OUT),
                preexec_fn=before_exec,
                start_new_session=True,
            )
        finally:
            os.close(stderr_fd)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.reader = channel.LineReader(self.from_worker)

    def close(self) -> None:
        """Kill everything the worker started and release the pipes."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            try:
                channel.send(self.to_worker, {"cmd": "exit"})
            except OSError:
                pass
            try:
                process.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.to_worker, self.from_worker):
            try:
                os.close(fd)
            except OSError:
                pass
        self.process = None

    def __enter__(self) -> WorkerSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- requests ----------------------------------------------------------
    def receive(self) -> dict[str, Any]:
        try:
            reply = self.reader.receive(self.deadline)
        except channel.ChannelTimeout:
            self.close()
            raise WorkerFailure("timeout", f"no answer within the {self.timeout_s():.0f} s wall-clock limit; the process group was killed") from None
        except channel.ChannelClosed:
            raise WorkerFailure(*self._death_reason()) from None
        except channel.ChannelError as exc:
            self.close()
            raise WorkerFailure("rejected", f"protocol violation: {exc}") from None
        if not reply.get("ok"):
            status = reply.get("status")
            if status not in ("compile_error", "runtime_error", "crashed", "rejected", "incorrect"):
                status = "rejected"
            raise WorkerFailure(status, str(reply.get("reason", "no reason given"))[:1000])
        return reply

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            channel.send(self.to_worker, message)
        except (BrokenPipeError, OSError):
            raise WorkerFailure(*self._death_reason()) from None
        return self.receive()

    def timeout_s(self) -> float:
        return self.deadline - self.started_at

    def _death_reason(self) -> tuple[str, str]:
        process = self.process
        code = None
        if process is not None:
            try:
                code = process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
        tail = self.log_tail()
        self.close()
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals.__members__.values() else str(-code)
            return "crashed", f"worker killed by signal {name}{_oom_hint(-code)}"
        if code is not None and code >= 128 + 1 and code - 128 in signal.Signals.__members__.values():
            return "crashed", f"worker killed by signal {signal.Signals(code - 128).name}{_oom_hint(code - 128)}"
        hint = f"; last output: {tail.splitlines()[-1][:200]}" if tail.strip() else ""
        return "crashed", f"worker exited (code {code}) without answering{hint}"

    def log_tail(self) -> str:
        """The end of what the kernel printed, for feedback (never parsed for the verdict)."""
        path = self.workdir / f"{self.spec.role}.log"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return ""
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return ""
            size = os.lseek(fd, 0, os.SEEK_END)
            os.lseek(fd, max(0, size - LOG_TAIL_BYTES), os.SEEK_SET)
            return os.read(fd, LOG_TAIL_BYTES).decode(errors="replace")
        except OSError:
            return ""
        finally:
            os.close(fd)


ADDR_NO_RANDOMIZE = 0x0040000


def _same_layout() -> None:
    """Turn off address-space randomisation for the worker: with it, two processes running the
    same kernel land on different cache-set alignments and differ by a few percent for their
    whole life. (It protects no one here: the candidate already runs its own code.)"""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)
        if current != -1:
            libc.personality(current | ADDR_NO_RANDOMIZE)
    except OSError:
        pass


def timing_cpus(threads: int) -> set[int] | None:
    """The same cores for every worker timed with `threads` threads: the last ones, away from
    the orchestrator. Two vCPUs of one VM can differ by a few percent for minutes; a baseline
    and a candidate pinned to the same cores cannot end up on different ones."""
    try:
        available = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if threads >= len(available):
        return None
    return set(available[-threads:])


def _oom_hint(signum: int) -> str:
    if signum == signal.SIGKILL:
        return " (killed: out of memory or a resource limit)"
    if signum == signal.SIGXCPU:
        return " (CPU-time limit)"
    if signum == signal.SIGXFSZ:
        return " (file-size limit: output flood)"
    return ""
