"""`kernel-agent db path|upgrade|backup`: where the database is and keeping it safe."""

from __future__ import annotations

import typer

from kernel_agent.cli import options as opt
from kernel_agent.cli.common import fail, stdout

app = typer.Typer(help="Database location, migrations and backups.", no_args_is_help=True, rich_markup_mode=None)


@app.command("path")
def path_command(db: str = opt.DB) -> None:
    """Print the database URL that commands would use."""
    from kernel_agent.db.session import resolve_url

    stdout.print(resolve_url(db), highlight=False, soft_wrap=True)


@app.command("upgrade")
def upgrade_command(db: str = opt.DB) -> None:
    """Apply pending migrations (every command also does this on open, after a backup)."""
    from kernel_agent.db.session import current_revision

    database = opt.open_db(db)
    note = f" (backup: {database.backup})" if database.backup else ""
    stdout.print(f"{database.url} at schema {current_revision(database.engine)}{note}", highlight=False, soft_wrap=True)


@app.command("backup")
def backup_command(db: str = opt.DB) -> None:
    """Write a consistent copy of a SQLite database next to it."""
    from kernel_agent.db.session import DatabaseError, backup_now

    try:
        target = backup_now(opt.open_db(db))
    except DatabaseError as exc:
        fail(str(exc))
    stdout.print(str(target), highlight=False, soft_wrap=True)
