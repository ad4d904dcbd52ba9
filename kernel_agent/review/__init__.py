"""A human's decisions on candidates, the HTML report they are made from, and the review page they are made on."""

from __future__ import annotations

from typing import Any

__all__ = ["queue", "record"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in __all__:
        from kernel_agent.review import decisions

        return getattr(decisions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
