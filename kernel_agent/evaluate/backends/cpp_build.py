"""The sandboxed C++ build: the trusted side compiles a candidate's CPP_SOURCE in an isolated, network-less
process under the evaluation's remaining time and the build's rlimits, and only it writes the build store."""

from __future__ import annotations

import math
import os
import resource
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from kernel_agent import cpp
from kernel_agent.evaluate.backends import build_store as store
from kernel_agent.evaluate.backends.base import BuildContext, BuildFailed

MB = 1 << 20
# Only in the trusted build's command line (not in the build key, they do not change the code):
# -pipe keeps the assembly out of the scratch space, and a source of endless errors stops early.
TRUSTED_BUILD_FLAGS = ("-pipe", "-fmax-errors=20")
COMPILER_LOG_BYTES = 64 << 10  # how much of the compiler's output is read back


def provide_library(cpp_source: str, build: BuildContext, view: Path) -> Path:
    """Build (or find) the library and place it alone in the evaluation's folder `view`."""
    for attempt in range(2):
        library = build_in_sandbox(cpp_source, build)
        try:
            return store.place(library, view, build.isolation.uid)
        except FileNotFoundError:
            if attempt:  # evicted twice by concurrent builds between finding and placing it
                raise BuildFailed(
                    "the library was evicted from the build store while being placed; "
                    "the store quota is too small for the builds running at once"
                ) from None
        except OSError as exc:
            raise BuildFailed(f"could not place the library in the work dir: {exc.strerror}") from None
    raise AssertionError("unreachable")


def build_in_sandbox(cpp_source: str, build: BuildContext) -> Path:
    """Compile in an isolated, network-less process under the evaluation's remaining time and the
    build's rlimits; only the trusted side writes the store. Returns the stored library.

    A limit hit is a BuildFailed whose one-line message names the limit (a compile_error)."""
    key = cpp.build_key(cpp_source)
    try:
        store.secure(build.store)
        found = store.lookup(build.store, key, build.library_bytes)
    except OSError as exc:
        raise BuildFailed(f"build store {build.store} is unusable: {exc.strerror}") from None
    if found is not None:
        return found
    wall = build.seconds_left()
    if wall < 1:
        raise BuildFailed("no time left to build: the evaluation's timeout is spent")
    build.sandbox_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=build.sandbox_root))
    try:
        built = _compile(cpp_source, build, tmp, wall)
        try:
            target = store.insert(build.store, key, built, build.library_bytes)
        except store.LibraryTooLarge as exc:
            raise BuildFailed(str(exc)) from None
        except OSError as exc:
            raise BuildFailed(f"could not store the library: {exc.strerror}") from None
        store.evict(build.store, build.quota_bytes, keep=(target,))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


class _CompilerLimits:
    """The compiler's rlimits: the tighter of the evaluation's limits and the build caps."""

    def __init__(self, build: BuildContext, wall: float) -> None:
        limits = build.limits
        self.cpu = max(
            1, min(build.cpu_seconds, math.ceil(wall) + 1, getattr(limits, "cpu_seconds", build.cpu_seconds))
        )
        self.file = min(build.library_bytes, getattr(limits, "file_bytes", build.library_bytes))
        self.data = min(build.memory_bytes, getattr(limits, "data_bytes", None) or build.memory_bytes)
        self.disk = getattr(limits, "disk_bytes", None)

    def apply(self) -> None:
        # The soft CPU limit sends SIGXCPU (gcc then names it) two seconds before the hard SIGKILL.
        resource.setrlimit(resource.RLIMIT_CPU, (self.cpu, self.cpu + 2))
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.file, self.file))
        resource.setrlimit(resource.RLIMIT_DATA, (self.data, self.data))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def reason(self, output: str) -> str | None:
        """The limit the compiler hit, from what gcc printed when a tool was killed."""
        if "CPU time limit exceeded" in output:
            return f"the compiler hit the {self.cpu} s CPU-time limit"
        if "File size limit exceeded" in output or "File too large" in output:  # killed, or EFBIG (SIGXFSZ ignored)
            return (
                f"the compiler's output passed the {self.file // MB} MB "
                "file-size limit (the per-library cap); nothing was stored"
            )
        if "No space left on device" in output:
            quota = f"{self.disk // MB} MB " if self.disk else ""
            return f"the compiler's scratch space passed the {quota}disk quota (No space left on device)"
        if any(
            text in output for text in ("out of memory", "memory exhausted", "Cannot allocate memory", "std::bad_alloc")
        ):
            return f"the compiler hit the {self.data // MB} MB memory limit"
        if "Killed signal terminated program" in output:
            return f"the compiler was killed at a resource limit ({self.cpu} s CPU time or {self.data // MB} MB memory)"
        return None


def _compile(cpp_source: str, build: BuildContext, tmp: Path, wall: float) -> Path:
    from kernel_agent.sandbox.host.isolation import (
        package_dir,
        prepare_workdir,
        sandbox_env,
        walls_command,
        wrap,
        write_trusted,
    )

    prepare_workdir(tmp, build.isolation.uid, writable=("out",))
    write_trusted(tmp / "kernel.cpp", cpp_source.encode())  # 0644 under any umask: the compiler runs as the sandbox uid
    built = tmp / "out" / "kernel.so"  # the only host folder the compiler may write
    command = cpp.compile_command(tmp / "kernel.cpp", built)
    command = [command[0], *TRUSTED_BUILD_FLAGS, *command[1:]]
    limits = _CompilerLimits(build, wall)
    command = walls_command(command, build.isolation, tmp)  # an #include reads only what the worker could
    command = wrap(command, build.isolation, tmp, disk_bytes=limits.disk)  # type: ignore[arg-type]
    log_path = tmp / "compiler.log"
    write_trusted(log_path, b"")
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=sandbox_env({"PYTHONPATH": str(package_dir().parent)}, tmp),
            cwd=tmp,
            preexec_fn=limits.apply,
            start_new_session=True,
        )
    finally:
        os.close(log)
    try:
        code = process.wait(timeout=wall)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        _kill_group(process)
    if code is None:
        why = (
            "what was left of the evaluation's timeout"
            if build.deadline is not None and wall < build.timeout
            else "the build limit"
        )
        raise BuildFailed(f"the compiler ran past its {wall:.0f} s time limit ({why}) and was killed")
    output = _read_head(log_path)
    if code != 0 or built.is_symlink() or not built.is_file():
        raise BuildFailed(limits.reason(output) or _compiler_summary(output) or f"compiler exited with {code}")
    return built


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the compiler's session (with bwrap or unshare its PID namespace dies with it)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    deadline = time.monotonic() + 10
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)


def _read_head(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return os.read(fd, COMPILER_LOG_BYTES).decode(errors="replace")
    finally:
        os.close(fd)


def _compiler_summary(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if "error" in line]
    text = " | ".join(errors[:3]) if errors else stderr.strip()
    return text.replace(str(Path.cwd()), ".")[:800]
