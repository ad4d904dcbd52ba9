"""Inline CUDA through torch's load_inline, built inside the sandbox at import."""

from __future__ import annotations

import ast
import os
from pathlib import Path

from kernel_agent.evaluate.backends import lint as checks
from kernel_agent.evaluate.backends.base import Backend, BuildContext, Prepared


class CudaBackend(Backend):
    name = "cuda"
    label = "CUDA"
    devices = ("cuda",)
    prompt_rules = (
        "CUDA backend: compile with `torch.utils.cpp_extension.load_inline(..., "
        "cuda_sources=...)` at import and call the extension from the entry point.",
    )

    def detects(self, source: str) -> bool:
        return "load_inline" in source and "cuda_sources" in source

    def required_construct(self, tree: ast.Module) -> str | None:
        if not checks.calls_named(tree, "load_inline"):
            return "no torch.utils.cpp_extension.load_inline(...) call"
        return None

    def prepare(self, source: str, device: str, workdir: Path, build: BuildContext) -> Prepared:
        # torch extensions build under $XDG_CACHE_HOME/torch_extensions: the sandbox's scratch space.
        return Prepared(env={"MAX_JOBS": str(os.cpu_count() or 1)})
