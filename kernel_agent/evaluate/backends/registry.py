"""The four backends and how a candidate's backend is detected from its source."""

from __future__ import annotations

import ast
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
from kernel_agent.evaluate.backends import lint as checks
from kernel_agent.evaluate.backends.base import Backend, BuildContext, BuildFailed, Prepared

MB = 1 << 20
# Only in the trusted build's command line (not in the build key, they do not change the code):
# -pipe keeps the assembly out of the scratch space, and a source of endless errors stops early.
TRUSTED_BUILD_FLAGS = ("-pipe", "-fmax-errors=20")
COMPILER_LOG_BYTES = 64 << 10  # how much of the compiler's output is read back


class TorchBackend(Backend):
    name = "torch"


class TritonBackend(Backend):
    name = "triton"

    def required_construct(self, tree: ast.Module) -> str | None:
        def is_triton_decorator(decorator: ast.expr) -> bool:
            name = checks._dotted(decorator.func if isinstance(decorator, ast.Call) else decorator)
            return "jit" in name or "autotune" in name or "heuristics" in name

        jitted = [
            node.name
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and any(is_triton_decorator(d) for d in node.decorator_list)
        ]
        if not jitted:
            return "no @triton.jit kernel in the source"
        launched = any(
            isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in jitted
            for n in ast.walk(tree)
        )
        if not launched:
            return f"the Triton kernel(s) {', '.join(jitted)} are never launched (expected kernel[grid](...))"
        return None

    def prepare(self, source: str, device: str, workdir: Path, build: BuildContext) -> Prepared:
        # The Triton cache defaults to $HOME/.triton, inside the sandbox's own scratch space
        # (a size-limited tmpfs with bwrap), so it is per sandbox and counts against the disk quota.
        env: dict[str, str] = {}
        if device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            return Prepared(env=env, interpreted=True)
        return Prepared(env=env)


class CudaBackend(Backend):
    name = "cuda"

    def required_construct(self, tree: ast.Module) -> str | None:
        if not checks.calls_named(tree, "load_inline"):
            return "no torch.utils.cpp_extension.load_inline(...) call"
        return None

    def prepare(self, source: str, device: str, workdir: Path, build: BuildContext) -> Prepared:
        # torch extensions build under $XDG_CACHE_HOME/torch_extensions: the sandbox's scratch space.
        return Prepared(env={"MAX_JOBS": str(os.cpu_count() or 1)})


class CppBackend(Backend):
    """Plain shared library through ctypes (fast route) or a CPU load_inline extension."""

    name = "cpp"
    allows_ctypes = True

    def required_construct(self, tree: ast.Module) -> str | None:
        if checks.calls_named(tree, "load_inline"):
            return None
        if not checks.defines(tree, "CPP_SOURCE"):
            return "no CPP_SOURCE string and no load_inline call"
        if checks.module_string_literal(tree, "CPP_SOURCE") is None:
            return (
                "CPP_SOURCE must be a module-level string literal "
                "(the trusted side builds it before the candidate runs)"
            )
        if not checks.calls_named(tree, "load_library"):
            return "CPP_SOURCE is never loaded with kernel_agent.cpp.load_library"
        return None

    def prepare(self, source: str, device: str, workdir: Path, build: BuildContext) -> Prepared:
        tree = ast.parse(source)
        cpp_source = checks.module_string_literal(tree, "CPP_SOURCE")
        env = {"MAX_JOBS": str(os.cpu_count() or 1)}
        if cpp_source is None:
            return Prepared(env=env)
        library = provide_library(cpp_source, build, workdir / store.VIEW)
        # The sandbox sees this one library, never the store. The variable names the folder through
        # /proc/self/root (the same folder, as the sandboxed process sees it) because the worker
        # session makes every env path inside the work dir writable by the sandbox (for caches),
        # and a writable build folder would let a candidate swap the baseline's library.
        env[cpp.BUILD_STORE_ENV] = f"/proc/self/root{library.parent}"
        return Prepared(env=env, extra_ro=(library.parent,))


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
        if "File size limit exceeded" in output:
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
    from kernel_agent.evaluate.sandbox.isolation import prepare_workdir, sandbox_env, wrap, write_trusted

    (tmp / "kernel.cpp").write_text(cpp_source)
    prepare_workdir(tmp, build.isolation.uid, writable=("out",))
    built = tmp / "out" / "kernel.so"  # the only host folder the compiler may write
    command = cpp.compile_command(tmp / "kernel.cpp", built)
    command = [command[0], *TRUSTED_BUILD_FLAGS, *command[1:]]
    limits = _CompilerLimits(build, wall)
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
            env=sandbox_env({}, tmp),
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


BACKENDS: dict[str, Backend] = {b.name: b for b in (TritonBackend(), CudaBackend(), CppBackend(), TorchBackend())}


def get_backend(name: str) -> Backend:
    if name not in BACKENDS:
        raise KeyError(f"unknown backend {name!r}; use one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def detect_backend(source: str) -> str:
    """Guess from the source: Triton jit, a CUDA load_inline, a C++ source, else PyTorch."""
    if "triton.jit" in source or "@jit" in source and "triton" in source:
        return "triton"
    if "load_inline" in source:
        return "cuda" if "cuda_sources" in source else "cpp"
    if "CPP_SOURCE" in source:
        return "cpp"
    return "torch"
