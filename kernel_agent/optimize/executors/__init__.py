"""Where evaluations run: a local pool on this machine, or Ray tasks on a cluster."""

from __future__ import annotations

from typing import Any

__all__ = ["Executor", "LocalExecutor"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in __all__:
        from kernel_agent.optimize.executors import local

        return getattr(local, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
