"""The four backends and how a candidate's backend is detected from its source."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kernel_agent import cpp
from kernel_agent.backends import checks
from kernel_agent.backends.base import Backend, BuildContext, BuildFailed, Prepared


class TorchBackend(Backend):
    name = "torch"


class TritonBackend(Backend):
    name = "triton"

    def required_construct(self, tree: ast.Module) -> str | None:
        def is_triton_decorator(decorator: ast.expr) -> bool:
            name = checks._dotted(decorator.func if isinstance(decorator, ast.Call) else decorator)
            return "jit" in name or "autotune" in name or "heuristics" in name

        jitted = [node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and any(is_triton_decorator(d) for d in node.decorator_list)]
        if not jitted:
            return "no @triton.jit kernel in the source"
        launched = any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in jitted for n in ast.walk(tree))
        if not launched:
            return f"the Triton kernel(s) {', '.join(jitted)} are never launched (expected kernel[grid](...))"
        return None

    def prepare(self, source: str, device: str, workdir: Path, build: BuildContext) -> Prepared:
        env = {"TRITON_CACHE_DIR": str(workdir / "triton-cache")}
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
        return Prepared(env={"TORCH_EXTENSIONS_DIR": str(workdir / "torch-extensions"), "MAX_JOBS": str(os.cpu_count() or 1)})


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
            return "CPP_SOURCE must be a module-level string literal (the trusted side builds it before the candidate runs)"
        if not checks.calls_named(tree, "load_library"):
            return "CPP_SOURCE is never loaded with kernel_agent.cpp.load_library"
        return None

    def prepare(self, source: str, device: str, workdir: Path, build: BuildContext) -> Prepared:
        tree = ast.parse(source)
        cpp_source = checks.module_string_literal(tree, "CPP_SOURCE")
        env = {"TORCH_EXTENSIONS_DIR": str(workdir / "torch-extensions"), "MAX_JOBS": str(os.cpu_count() or 1)}
        if cpp_source is None:
            return Prepared(env=env)
        build_in_sandbox(cpp_source, build)
        env[cpp.BUILD_STORE_ENV] = str(build.store)
        return Prepared(env=env, extra_ro=(build.store,))


def build_in_sandbox(cpp_source: str, build: BuildContext) -> Path:
    """Compile in an isolated, network-less process; only the trusted side writes the store."""
    from kernel_agent.sandbox.isolation import prepare_workdir, sandbox_env, wrap

    target = build.store / f"{cpp.build_key(cpp_source)}.so"
    if target.exists():
        return target
    build.store.mkdir(parents=True, exist_ok=True)
    build.sandbox_root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=build.sandbox_root))
    try:
        (tmp / "kernel.cpp").write_text(cpp_source)
        prepare_workdir(tmp, build.isolation.uid)
        built = tmp / "out" / "kernel.so"  # the only folder the compiler may write
        command = wrap(cpp.compile_command(tmp / "kernel.cpp", built), build.isolation, tmp)
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=build.timeout, env=sandbox_env({}, tmp), cwd=tmp)
        except subprocess.TimeoutExpired:
            raise BuildFailed(f"compiler ran past {build.timeout:.0f} s") from None
        if proc.returncode != 0 or built.is_symlink() or not built.is_file():
            raise BuildFailed(_compiler_summary(proc.stderr) or f"compiler exited with {proc.returncode}")
        staged = build.store / f".{target.name}.{os.getpid()}"
        shutil.copyfile(built, staged, follow_symlinks=False)
        os.chmod(staged, 0o755)
        os.replace(staged, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


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
