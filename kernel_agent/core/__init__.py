"""Records every stage shares: the verdict, the sanitizer for candidate text, the environment fingerprint."""

from __future__ import annotations

from typing import Any

__all__ = ["Verdict"]


def __getattr__(name: str) -> Any:
    """Import on first use: the sandbox worker and the GPU machine import parts of this package alone."""
    if name in __all__:
        from kernel_agent.core import verdict

        return getattr(verdict, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
