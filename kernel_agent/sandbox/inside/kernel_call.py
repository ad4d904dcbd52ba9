"""Calling the kernel inside the worker, and what its failures and results say: a raised exception becomes a
verdict-worthy `CallError` with the candidate's own line, a result must be plain tensors that share no
memory with the inputs. Runs in the sandboxed process (imports nothing that process does not need)."""

from __future__ import annotations

import errno
import os
import subprocess
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernel_agent.core.verdict import Status
from kernel_agent.sandbox.protocol import CallError


class Violation(Exception):
    """The candidate broke a harness rule (status `rejected`)."""


def one_line(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):  # its text is the whole command line (Triton's gcc call)
        said = (exc.stderr or exc.output or b"")[-300:]
        said = said.decode(errors="replace") if isinstance(said, bytes) else said
        cmd = exc.cmd if isinstance(exc.cmd, (list, tuple)) else str(exc.cmd).split()
        text = f"CalledProcessError: {Path(str(cmd[0])).name if cmd else '?'} exited with status {exc.returncode}"
        said = said if said.strip() else last_log_line()
        text += f": {said}" if said.strip() else ""
    else:
        text = f"{type(exc).__name__}: {exc}"
        if refused_by_walls(exc):
            text += " (a call the sandbox refuses: its seccomp filter or Landlock, named in the level line)"
    return text.replace("\n", " ")[:500]


def refused_by_walls(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it, is the EPERM the walls answer a refused call with."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, OSError) and seen.errno == errno.EPERM:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


LOG: list[str] = []  # this worker's own stdout/stderr file, where a failed compiler wrote its messages


def last_log_line() -> str:
    try:
        with open(LOG[0], "rb") as log:
            log.seek(max(0, os.fstat(log.fileno()).st_size - 4096))
            lines = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    except (OSError, IndexError):
        return ""
    errors = [line for line in lines if "error" in line.lower()]
    return (errors or lines or [""])[-1][:300]


def where(exc: BaseException, source_path: str) -> str:
    """The candidate-file line that raised, for feedback to the author."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == source_path:
            return f" (line {frame.lineno}: {(frame.line or '').strip()[:120]})"
    return ""


def invoke(fn: Callable[..., Any], inputs: list[Any], source_path: str) -> Any:
    """The kernel on `inputs`; whatever it raises, as a verdict-worthy CallError."""
    try:
        return fn(*inputs)
    except SystemExit as exc:
        raise CallError(Status.CRASHED, f"candidate called exit({exc.code})") from None
    except MemoryError:
        raise CallError(Status.CRASHED, "out of memory (the sandbox memory limit was hit)") from None
    except BaseException as exc:  # noqa: BLE001
        raise failure_of(exc, source_path) from None


def failure_of(exc: BaseException, source_path: str) -> CallError:
    """What a kernel's exception says about it: out of memory, a file or disk limit, or its own error."""
    if is_out_of_memory(exc):
        return CallError(Status.CRASHED, f"out of memory (the sandbox memory limit was hit): {one_line(exc)[:200]}")
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return CallError(Status.CRASHED, "file-size limit hit (output flood): SIGXFSZ/EFBIG")
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return CallError(
            Status.CRASHED, f"disk quota reached (the sandbox's scratch space is full): {one_line(exc)[:200]}"
        )
    status = Status.COMPILE_ERROR if "CompilationError" in type(exc).__name__ else Status.RUNTIME_ERROR
    return CallError(status, f"{one_line(exc)}{where(exc, source_path)}")


def plain_outputs(tensor_type: type, result: Any) -> tuple[Any, ...]:
    """A call's result as a tuple of plain tensors (no subclass, no per-instance attributes)."""
    outputs = (result,) if not isinstance(result, (tuple, list)) else tuple(result)
    for index, out in enumerate(outputs):
        if type(out) is not tensor_type:
            raise CallError(Status.RUNTIME_ERROR, f"output {index} is a {type(out).__name__}, not a plain torch.Tensor")
        if out.__dict__:
            # Per-instance overrides (.detach, .cpu, ...) would run the real work after the clock stops.
            raise CallError(
                Status.REJECTED,
                f"output {index} carries per-instance attributes "
                f"({', '.join(sorted(out.__dict__))[:120]}): lazy outputs are not allowed",
            )
    return outputs


def pointers(result: Any) -> list[int]:
    """Data pointers of a call's tensor outputs (what is not a tensor is for `describe` to refuse)."""
    outputs = result if isinstance(result, (tuple, list)) else (result,)
    return [out.data_ptr() if hasattr(out, "data_ptr") else 0 for out in outputs]


def check_aliasing(outputs: tuple[Any, ...], inputs: list[Any]) -> None:
    for i, out in enumerate(outputs):
        out_storage = out.untyped_storage()
        lo, hi = out_storage.data_ptr(), out_storage.data_ptr() + out_storage.nbytes()
        for j, inp in enumerate(inputs):
            storage = inp.untyped_storage()
            a, b = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
            if out_storage.nbytes() and storage.nbytes() and lo < b and a < hi:
                raise CallError(
                    Status.INCORRECT, f"output {i} shares memory with input {j} (outputs may not alias inputs)"
                )


def is_out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return (
        type(exc).__name__ == "OutOfMemoryError" or "can't allocate memory" in text or "Cannot allocate memory" in text
    )
