"""CPU C++ (OpenMP, SIMD): a plain shared library the trusted side builds, loaded through ctypes, or a CPU
load_inline extension."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from kernel_agent import cpp
from kernel_agent.evaluate.backends import build_store as store
from kernel_agent.evaluate.backends import lint as checks
from kernel_agent.evaluate.backends.base import Backend, BuildContext, Prepared
from kernel_agent.evaluate.backends.cpp_build import provide_library


class CppBackend(Backend):
    name = "cpp"
    label = "C++"
    devices = ("cpu",)
    allows_ctypes = True
    prompt_rules = (
        'C++ backend: put ALL C/C++ code in ONE module-level plain string literal `CPP_SOURCE = r"""..."""`'
        " (no f-string, no concatenation, no formatting): the "
        "trusted side compiles that literal before your module runs.",
        "Load it at import with `from kernel_agent.cpp import load_library, ptr` and `LIB = load_library(CPP_SOURCE)`;"
        ' export `extern "C"` functions and call them with `ptr(tensor)` for pointers and ctypes scalars'
        " (`ctypes.c_long`, `ctypes.c_int`, `ctypes.c_float`).",
        "It is compiled with `gcc " + " ".join(f for f in cpp.DEFAULT_FLAGS if f not in ("-x", "c++")) + "`:"
        " OpenMP pragmas and SIMD intrinsics (`#include <immintrin.h>`) "
        "are allowed; make tensors contiguous before passing pointers.",
    )

    def detects(self, source: str) -> bool:
        return "load_inline" in source or "CPP_SOURCE" in source

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
        cpp_source = checks.module_string_literal(ast.parse(source), "CPP_SOURCE")
        env = {"MAX_JOBS": str(os.cpu_count() or 1)}
        if cpp_source is None:
            return Prepared(env=env)
        library = provide_library(cpp_source, build, workdir / store.VIEW)
        # The sandbox sees this one library, never the store. The worker is told the folder (in its
        # config, not the environment: nothing kernel-agent's marks a sandboxed process) through
        # /proc/self/root, the same folder as the sandboxed process sees it.
        return Prepared(env=env, extra_ro=(library.parent,), build_store=f"/proc/self/root{library.parent}")
