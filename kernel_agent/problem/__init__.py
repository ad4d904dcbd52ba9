"""The trusted half of every evaluation: load a problem, draw its inputs and references, size it, audit it."""

from __future__ import annotations

from typing import Any

__all__ = ["Problem", "ProblemError", "load_problem"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in __all__:
        from kernel_agent.problem import load

        return getattr(load, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
