"""Load a CPU C/C++ kernel library from a candidate's literal `CPP_SOURCE`.

Why a plain shared library through ctypes: `gcc -O3 -fopenmp -shared` builds in
about 0.2 s, while a torch `load_inline` extension takes about 40 s on two cores.

Inside the sandbox the library must already be in the evaluation's own build
folder, which the worker names (`use_trusted_store`): the trusted side builds the module's
literal `CPP_SOURCE` under time and size limits and places that one library there,
read-only (THREATS.md row 37). The persistent store of every build is private to
the trusted side, so no candidate can load a library built for another.
Outside the sandbox (an exported package, a user's shell) a missing library is
built into the user's cache.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

import torch

COMPILER = os.environ.get("KERNEL_AGENT_CC", "gcc")
DEFAULT_FLAGS: tuple[str, ...] = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=gnu++17", "-x", "c++")
BUILD_STORE_ENV = "KERNEL_AGENT_BUILD_STORE"
_TRUSTED_STORE: list[Path] = []  # set by the sandbox's worker: load from here, never build


def use_trusted_store(folder: Path) -> None:
    """Inside the sandbox: libraries come only from the trusted side's build, placed in `folder`."""
    _TRUSTED_STORE[:] = [folder]


class CppBuildError(RuntimeError):
    """The compiler rejected the source; the message holds its diagnostics."""


def build_key(source: str, flags: tuple[str, ...] = DEFAULT_FLAGS) -> str:
    """Content address of a build: source, flags and compiler identity."""
    digest = hashlib.sha256()
    for part in (source, "\0".join(flags), COMPILER, _compiler_version()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


_VERSION_CACHE: dict[str, str] = {}


def _compiler_version() -> str:
    if COMPILER not in _VERSION_CACHE:
        try:
            out = subprocess.run([COMPILER, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = "unknown"
        _VERSION_CACHE[COMPILER] = out.splitlines()[0] if out else "unknown"
    return _VERSION_CACHE[COMPILER]


def default_store() -> Path:
    """Where builds live: the sandbox's read-only store, else the user's cache."""
    if _TRUSTED_STORE:
        return _TRUSTED_STORE[0]
    store = os.environ.get(BUILD_STORE_ENV)
    if store:
        return Path(store)
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "kernel-agent" / "builds"


def compile_command(source_path: Path, output_path: Path, flags: tuple[str, ...] = DEFAULT_FLAGS) -> list[str]:
    return [COMPILER, *flags, str(source_path), "-o", str(output_path)]


def build_library(source: str, store: Path, flags: tuple[str, ...] = DEFAULT_FLAGS, timeout: float = 120.0) -> Path:
    """Compile `source` into `store/<key>.so` (atomically) and return the path."""
    target = store / f"{build_key(source, flags)}.so"
    if target.exists():
        return target
    store.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=store) as tmp:
        src = Path(tmp) / "kernel.cpp"
        src.write_text(source)
        out = Path(tmp) / "kernel.so"
        proc = subprocess.run(compile_command(src, out, flags), capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise CppBuildError(proc.stderr.strip() or f"{COMPILER} exited with {proc.returncode}")
        os.replace(out, target)
    return target


def load_library(source: str, flags: tuple[str, ...] = DEFAULT_FLAGS) -> ctypes.CDLL:
    """Return the compiled library for `source` (a module-level string literal)."""
    store = default_store()
    target = store / f"{build_key(source, flags)}.so"
    if not target.exists():
        if _TRUSTED_STORE:
            raise CppBuildError(
                "library not in the build store: CPP_SOURCE must be a module-level string literal "
                "so the trusted side can build it before the candidate runs"
            )
        target = build_library(source, store, flags)
    return ctypes.CDLL(str(target))


def ptr(tensor: torch.Tensor) -> ctypes.c_void_p:
    """A tensor's data pointer for a ctypes call (the tensor must be contiguous)."""
    if not tensor.is_contiguous():
        raise ValueError("ptr() needs a contiguous tensor; call .contiguous() first")
    return ctypes.c_void_p(tensor.data_ptr())
