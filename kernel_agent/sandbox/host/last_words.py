"""What a sandboxed worker left behind: the end of its log as feedback (never parsed for a verdict), the
most telling line it or its launcher wrote before dying, and the one-line reason for how it died."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

from kernel_agent.core.text import clean
from kernel_agent.core.verdict import Status

LOG_TAIL_BYTES = 4000


def log_tail(workdir: Path, tag: str) -> str:
    """The end of what the kernel printed, for feedback (never parsed for the verdict)."""
    return clean(tail(workdir / f"{tag}.log"), LOG_TAIL_BYTES, keep_newlines=True)


def last_error_line(workdir: Path, tag: str) -> str:
    """The most telling line the worker or its launcher wrote before dying (sanitized, truncated)."""
    for name in (f"{tag}.log", f"{tag}.sandbox.log"):
        lines = [line.strip() for line in tail(workdir / name).splitlines() if telling(line)]
        errors = [line for line in lines if "Error" in line or "error" in line or "denied" in line]
        if errors or lines:
            return clean((errors or lines)[-1], 300)
    return ""


# torch's advice printed after every CUDA error: it contains "error" and hides the line that names it.
ADVICE = (
    "CUDA kernel errors might be asynchronously reported",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING",
    "Compile with `TORCH_USE_CUDA_DSA`",
)


def telling(line: str) -> bool:
    """A log line worth quoting as a worker's last words (not blank, not torch's standing advice)."""
    return bool(line.strip()) and not any(advice in line for advice in ADVICE)


def tail(path: Path) -> str:
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


def death_reason(code: int | None, last: str, over_booking: str, disk_reason: str | None) -> tuple[Status, str]:
    """Why a worker that stopped answering is gone, from its exit code and what it left behind."""
    said = f"; last output: {last}" if last else ""
    if over_booking:
        return Status.CRASHED, f"{over_booking}; the sandbox was killed{said}"
    if disk_reason:
        return Status.CRASHED, f"{disk_reason}; the sandbox was killed"
    signum = -code if code is not None and code < 0 else (code - 128 if code is not None and code > 128 else None)
    if signum is not None and signum in signal.Signals.__members__.values():
        return Status.CRASHED, f"worker killed by signal {signal.Signals(signum).name}{_signal_hint(signum)}{said}"
    if code is not None and code < 0:
        return Status.CRASHED, f"worker killed by signal {-code}{said}"
    return Status.CRASHED, f"worker exited (code {code}) without answering{said}"


def _signal_hint(signum: int) -> str:
    if signum == signal.SIGKILL:
        return " (killed: out of memory or a resource limit)"
    if signum == signal.SIGXCPU:
        return " (CPU-time limit)"
    if signum == signal.SIGXFSZ:
        return " (file-size limit: output flood)"
    if signum == signal.SIGSEGV:
        return " (a memory fault: a write into the read-only input segment is one cause)"
    if signum == signal.SIGBUS:
        return " (a bus error: a write through a memory map past the disk quota is one cause)"
    return ""
