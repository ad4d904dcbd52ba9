"""Where every run, candidate, verdict and review is kept: SQLAlchemy models, writes, reads, migrations.

`Database` opens one (SQLite `runs.db` by default, PostgreSQL by URL) and migrates it with Alembic.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Database", "DatabaseError"]


def __getattr__(name: str) -> Any:
    """Import on first use: the evaluation path must import without SQLAlchemy installed."""
    if name in __all__:
        from kernel_agent.db import session

        return getattr(session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
