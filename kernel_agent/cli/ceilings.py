"""The device ceilings `eval` and `profile` use: the stored ones (memo/ceilings.py, as `optimize` reads
them), so the roofline floor that enters a verdict's decision is the same whichever command evaluated it."""

from __future__ import annotations

from typing import Any

from kernel_agent.cli.common import stderr, warn
from kernel_agent.cli.options import open_db


def database_here(db: str | None) -> tuple[Any, str]:
    """The database and '', or None and why not (its packages are not installed: the GPU machine)."""
    try:
        import sqlalchemy  # noqa: F401 - the first the database needs: its absence is the one to name
    except ImportError as exc:
        return None, f"{exc.name} is not installed"
    try:
        return open_db(db), ""
    except ImportError as exc:
        return None, f"{exc.name} is not installed"


def profile_ceilings(db: str | None, device: str, threads: int | None, remeasure: bool) -> tuple[Any, str]:
    """The ceilings `optimize` uses for this device fingerprint (stored once in the database), and where they
    came from; (None, '') with a warning when none can be measured."""
    from kernel_agent.measure.error import ProfileError
    from kernel_agent.memo.ceilings import ceilings_of

    database, why_not = database_here(db)

    def announce(line: str) -> None:
        stderr.print(line, highlight=False)

    try:
        found = ceilings_of(database, device, threads, remeasure, announce, why_not)
    except (ProfileError, RuntimeError, ValueError) as exc:
        warn(f"no ceilings: {exc}")
        return None, ""
    return found.ceilings, found.origin
