"""Many kernels, rounds of proposals: the loop, its budgets, where evaluations run, and resume."""

from __future__ import annotations

from typing import Any

__all__ = ["KernelSpec", "RunPlan", "expand_paths"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in __all__:
        from kernel_agent.optimize import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
