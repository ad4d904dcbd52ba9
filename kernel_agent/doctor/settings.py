"""The user's settings as the tool would read them: the database URL and the LLM endpoint (never a key)."""

from __future__ import annotations

import os

from kernel_agent.doctor.record import Check, State


def database_check(db: str | None) -> Check:
    from kernel_agent.db.session import DB_ENV, display_url, resolve_url

    source = "--db" if db else (f"${DB_ENV}" if os.environ.get(DB_ENV) else "default: runs.db here")
    return Check("settings", "database", State.OK, f"{display_url(resolve_url(db))} ({source})")


def llm_check() -> Check:
    """Whether `--provider openai` would find a key; the key itself is never read into the output."""
    from kernel_agent.optimize.config import ProviderConfig

    where = f"endpoint from --base-url (default {ProviderConfig().base_url})"
    if os.environ.get("OPENAI_API_KEY"):
        return Check("settings", "LLM endpoint", State.OK, f"$OPENAI_API_KEY is set (not shown); {where}")
    return Check(
        "settings",
        "LLM endpoint",
        State.NOTE,
        "no $OPENAI_API_KEY: the offline search provider works; --provider openai needs a key",
        "export OPENAI_API_KEY=... or pass --api-key-file FILE",
    )
