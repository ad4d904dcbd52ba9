"""The machine's limits and where a kernel stands against them: work counts (work.py), ceilings
(ceilings.py), roofline rows (roofline.py), the prompt's profile (profile.py), operator breakdowns
(op_breakdown.py in the sandbox, trusted_breakdown.py in-process) and the machine's load (contention.py)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_HOME = {"build_profile": "profile", "work_counts": "work"}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in _HOME:
        return getattr(import_module(f"kernel_agent.measure.{_HOME[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
