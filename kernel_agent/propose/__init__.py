"""Providers of candidate kernels, found by name.

Built in: `search` (default, offline), `openai`, `replay`. A third-party
provider is a class with `name` and `propose(context)`, registered under the
`kernel_agent.providers` entry-point group; it receives the same keyword
options as the built-ins and may ignore what it does not use.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from kernel_agent.propose.base import Provider

BUILTIN = ("search", "openai", "replay")


def available() -> list[str]:
    return [*BUILTIN, *sorted(ep.name for ep in entry_points(group="kernel_agent.providers") if ep.name not in BUILTIN)]


def make_provider(name: str, **options: Any) -> Provider:
    """Build a provider; raises ValueError (one line) for unknown names or bad options."""
    if name == "search":
        from kernel_agent.propose.search import SearchProvider

        return SearchProvider()
    if name == "openai":
        from kernel_agent.propose.openai_chat import OpenAIProvider, resolve_api_key

        key = resolve_api_key(options.pop("api_key_file", None))
        return OpenAIProvider(api_key=key, **options)
    if name == "replay":
        from kernel_agent.propose.replay import ReplayProvider

        return ReplayProvider(options["calls"])
    for entry in entry_points(group="kernel_agent.providers"):
        if entry.name == name:
            return entry.load()(**options)
    raise ValueError(f"unknown provider {name!r}; use one of {', '.join(available())}")
