"""Winners out of a run into a package others can install: selection, re-verification, files."""

from __future__ import annotations

from typing import Any

__all__ = ["export_run"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in __all__:
        from kernel_agent.export import package

        return getattr(package, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
