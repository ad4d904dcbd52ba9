"""Triton kernels: compiled on a GPU, run under Triton's interpreter on the CPU (correctness only, never timed)."""

from __future__ import annotations

import ast
from pathlib import Path

from kernel_agent.evaluate.backends import lint as checks
from kernel_agent.evaluate.backends.base import Backend, BuildContext, Prepared


class TritonBackend(Backend):
    name = "triton"
    label = "Triton"
    requires = ("triton>=3.0",)
    prompt_rules = (
        "Triton backend: write at least one `@triton.jit` kernel and launch it as "
        "`kernel_fn[grid](...)` from the entry point; keep masks for ragged edges.",
    )

    def detects(self, source: str) -> bool:
        return "triton.jit" in source or "@jit" in source and "triton" in source

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
        if device == "cpu":
            return Prepared(env={"TRITON_INTERPRET": "1"}, interpreted=True)
        return Prepared()
