"""Providers of candidate kernels, found by name.

Built in: `search` (default, offline), `openai`, `replay`. They register the way another package's provider
does: a name and a `module:attribute` reference to a factory called with keyword options, the built-ins
here and a third party's under the `kernel_agent.providers` entry-point group. A factory receives the same
keyword options whoever made it and may ignore what it does not use.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from kernel_agent.propose.base import Provider

GROUP = "kernel_agent.providers"
BUILTIN: dict[str, str] = {
    "search": "kernel_agent.propose.search:SearchProvider",
    "openai": "kernel_agent.propose.openai_chat:from_options",
    "replay": "kernel_agent.propose.replay:ReplayProvider",
}


def registered() -> dict[str, EntryPoint]:
    """Every provider by name, the built-ins first; another package cannot take a built-in's name."""
    found = {name: EntryPoint(name, value, GROUP) for name, value in BUILTIN.items()}
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        found.setdefault(entry.name, entry)
    return found


def available() -> list[str]:
    return list(registered())


def make_provider(name: str, **options: Any) -> Provider:
    """Build a provider; raises ValueError (one line) for unknown names or bad options."""
    entry = registered().get(name)
    if entry is None:
        raise ValueError(f"unknown provider {name!r}; use one of {', '.join(available())}")
    return entry.load()(**options)
