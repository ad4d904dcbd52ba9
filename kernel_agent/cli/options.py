"""Typer option declarations shared by several commands."""

from __future__ import annotations

from pathlib import Path

import typer

DB = typer.Option(None, "--db", help="Database file or SQLAlchemy URL (default: $KERNEL_AGENT_DB or ./runs.db).", show_default=False)
JSON = typer.Option(False, "--json", help="Print one JSON document on stdout.")
DEVICE = typer.Option("auto", help="auto, cpu or cuda.")
TIMEOUT = typer.Option(180.0, help="Wall-clock seconds for each sandboxed process.")
MIN_GAIN = typer.Option(0.02, help="Accept as faster only when the 95% interval's low end clears 1 + MIN_GAIN.")
THREADS = typer.Option(None, min=1, help="CPU threads for kernels and timing, the same for baseline and candidate (default: all cores).")
SANDBOX = typer.Option(Path("sandbox"), help="Folder for per-evaluation work dirs.")


def open_db(db: str | None):
    """Open and migrate the database, or exit 2 with one line."""
    from kernel_agent.cli.common import fail
    from kernel_agent.db.session import DatabaseError, open_database

    try:
        return open_database(db)
    except DatabaseError as exc:
        fail(str(exc))
