"""One candidate, one problem, one verdict: static checks, trusted build, sandboxed checks and A/B timing."""

from __future__ import annotations

from typing import Any

__all__ = ["EvalOptions", "evaluate"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in __all__:
        from kernel_agent.evaluate import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
