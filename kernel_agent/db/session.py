"""Open the database: resolve the URL, migrate (after a backup), tune SQLite.

Every command that opens the database goes through `open_database`, so a
database written by an older kernel-agent is upgraded before use and one
written by a newer kernel-agent is refused without being touched.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

DEFAULT_DB = "runs.db"
DB_ENV = "KERNEL_AGENT_DB"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"


class DatabaseError(RuntimeError):
    """The database cannot be used as it is (one line naming the fix)."""


def resolve_url(db: str | None) -> str:
    """`--db` wins, then KERNEL_AGENT_DB, then runs.db in the working directory."""
    value = db or os.environ.get(DB_ENV) or DEFAULT_DB
    if "://" in value:
        return value
    return f"sqlite:///{Path(value).expanduser().resolve()}"


def sqlite_path(url: str) -> Path | None:
    if url.startswith("sqlite:///") and not url.endswith(":memory:"):
        return Path(url.removeprefix("sqlite:///"))
    return None


def _alembic_config(connection=None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _tune_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def on_connect(dbapi_connection, _record) -> None:  # noqa: ANN001 - DB-API objects
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()


@dataclass
class Database:
    url: str
    engine: Engine
    sessions: sessionmaker[Session]
    backup: Path | None = None  # the copy made before the last migration, if any

    def session(self) -> Session:
        return self.sessions()

    @property
    def path(self) -> Path | None:
        return sqlite_path(self.url)

    def close(self) -> None:
        self.engine.dispose()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def open_database(db: str | None = None, migrate: bool = True) -> Database:
    """Open (creating if needed) and migrate the database; raise DatabaseError on trouble."""
    url = resolve_url(db)
    path = sqlite_path(url)
    if path is not None:
        if path.exists() and path.is_dir():
            raise DatabaseError(f"{path} is a directory; pass a database file path with --db")
        if not path.parent.exists():
            raise DatabaseError(f"{path.parent} does not exist; create it or pass another --db")
    try:
        engine = create_engine(url, connect_args={"timeout": 30} if path else {}, pool_pre_ping=True)
    except Exception as exc:  # noqa: BLE001 - a bad URL or a missing driver
        raise DatabaseError(f"cannot use database URL {url!r}: {exc}") from None
    if path is not None:
        _tune_sqlite(engine)
    database = Database(url, engine, sessionmaker(engine, expire_on_commit=False))
    if migrate:
        database.backup = _migrate(database)
    return database


def _migrate(database: Database) -> Path | None:
    script = ScriptDirectory.from_config(_alembic_config())
    head = script.get_current_head()
    try:
        revision = current_revision(database.engine)
    except Exception as exc:  # noqa: BLE001 - not a database, locked, unreachable
        raise DatabaseError(f"cannot open the database {database.url}: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if revision == head:
        return None
    known = {rev.revision for rev in script.walk_revisions()}
    if revision is not None and revision not in known:
        raise DatabaseError(
            f"the database {database.url} has schema revision {revision}, written by a newer kernel-agent; "
            "upgrade kernel-agent (pip install -U kernel-agent) or pass another --db"
        )
    backup = _backup(database) if revision is not None else None
    with database.engine.begin() as connection:
        command.upgrade(_alembic_config(connection), "head")
    return backup


def _backup(database: Database) -> Path | None:
    """Copy a SQLite file (with its WAL) before migrating it."""
    path = database.path
    if path is None or not path.exists():
        return None
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.bak-{stamp}")
    with database.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(FULL)")
    shutil.copy2(path, target)
    return target


def backup_now(database: Database, target: Path | None = None) -> Path:
    """`kernel-agent db backup`: a consistent copy through SQLite's online backup API."""
    path = database.path
    if path is None:
        raise DatabaseError("db backup works on SQLite files; use your server's tools (pg_dump) for other databases")
    import sqlite3

    target = target or path.with_name(f"{path.name}.bak-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    source = sqlite3.connect(path)
    try:
        copy = sqlite3.connect(target)
        with copy:
            source.backup(copy)
        copy.close()
    finally:
        source.close()
    return target
