"""The machine's limits and where a kernel stands against them: work counts, ceilings, roofline,
operator breakdown, timing statistics."""

from __future__ import annotations

from typing import Any

__all__ = ["build_profile", "work_counts"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in __all__:
        from kernel_agent.measure import profile

        return getattr(profile, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
