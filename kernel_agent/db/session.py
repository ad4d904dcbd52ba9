"""Open the database: resolve the URL, migrate (after a backup), tune SQLite.

Every command that opens the database goes through `open_database`, so a
database written by an older kernel-agent is upgraded before use and one
written by a newer kernel-agent is refused without being touched.

Several processes may share one database (SQLite file or PostgreSQL server):
migrations are serialised (a lock on the SQLite file's folder, an advisory
lock on PostgreSQL) and re-check the revision once they hold the lock, and
`Database.write()` opens write transactions that cannot fail half-way on
SQLite's snapshot upgrade (BEGIN IMMEDIATE).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, make_url
from sqlalchemy.orm import Session, sessionmaker

DEFAULT_DB = "runs.db"
DB_ENV = "KERNEL_AGENT_DB"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
MIGRATION_LOCK_KEY = 0x6B61_6D69  # pg_advisory_xact_lock key: "kami" (kernel-agent migrations)


class DatabaseError(RuntimeError):
    """The database cannot be used as it is (one line naming the fix)."""


def resolve_url(db: str | None) -> str:
    """`--db` wins, then KERNEL_AGENT_DB, then runs.db in the working directory."""
    value = db or os.environ.get(DB_ENV) or DEFAULT_DB
    if "://" in value:
        return value
    return f"sqlite:///{Path(value).expanduser().resolve()}"


def is_sqlite(url: str) -> bool:
    return url.startswith("sqlite")


def is_postgresql(url: str) -> bool:
    return url.startswith("postgresql")


def display_url(url: str) -> str:
    """The URL with any password masked, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is shown as it is
        return url


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
    closed: bool = False

    def session(self) -> Session:
        return self.sessions()

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session in a write transaction, committed on success, rolled back on error.

        On SQLite the transaction starts with BEGIN IMMEDIATE: it takes the write lock
        first (waiting up to busy_timeout), so a read-then-write transaction never fails
        with "database is locked" when another process committed in between (WAL cannot
        upgrade a stale read snapshot). PostgreSQL needs nothing: its writers wait on row locks.
        """
        with self.sessions() as session, session.begin():
            if is_sqlite(self.url):
                session.connection().exec_driver_sql("BEGIN IMMEDIATE")
            yield session

    @property
    def display_url(self) -> str:
        return display_url(self.url)

    @property
    def path(self) -> Path | None:
        return sqlite_path(self.url)

    def close(self) -> None:
        """Fold the WAL into the database file, then drop the connections.

        Without the checkpoint a finished run lives partly in `runs.db-wal`, and a user who copies
        `runs.db` alone (to share a run, to attach it to a bug) copies a database without it. A crash
        skips this and SQLite recovers from the WAL as before. The checkpoint waits at most a second
        for another process's readers; one still busy leaves the WAL to the last process to close.
        """
        if self.closed:
            return
        self.closed = True
        if self.path is not None and self.path.exists():  # never create a file that is gone by exit time
            try:
                with self.engine.connect() as connection:
                    connection.exec_driver_sql("PRAGMA busy_timeout=1000")
                    connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            except Exception:  # noqa: BLE001 - the data is safe in the WAL; closing must not fail the command
                pass
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
        hint = (
            "; install the cluster extra: pip install 'kernel-agent[cluster]'"
            if isinstance(exc, ImportError) and is_postgresql(url)
            else ""
        )
        raise DatabaseError(f"cannot use database URL {display_url(url)!r}: {exc}{hint}") from None
    if path is not None:
        _tune_sqlite(engine)
    database = Database(url, engine, sessionmaker(engine, expire_on_commit=False))
    if migrate:
        database.backup = _migrate(database)
    return database


def _migrate(database: Database) -> Path | None:
    script = ScriptDirectory.from_config(_alembic_config())
    head = script.get_current_head()
    known = {rev.revision for rev in script.walk_revisions()}
    try:
        # The first connection turns a new SQLite file to WAL: two processes doing it at once can deadlock
        # in SQLite's own locks, where the busy timeout does not wait ("database is locked", 4 of 20 trials of
        # six processes opening one new file). Opening under the migration lock serialises that step.
        with _migration_lock(database):
            revision = current_revision(database.engine)
    except Exception as exc:  # noqa: BLE001 - not a database, locked, unreachable
        raise DatabaseError(
            f"cannot open the database {database.display_url}: {type(exc).__name__}: {str(exc).splitlines()[0]}"
        ) from None
    if revision == head:
        return None
    _refuse_newer(database, revision, known)
    # Another process may be migrating the same database right now: take the lock, then look again.
    with _migration_lock(database):
        revision = current_revision(database.engine)
        if revision == head:
            return None
        _refuse_newer(database, revision, known)
        backup = _backup(database) if revision is not None else None
        sqlite = is_sqlite(database.url)
        with database.engine.begin() as connection:
            if is_postgresql(database.url):
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
                if MigrationContext.configure(connection).get_current_revision() == head:
                    return backup
            if sqlite:  # SQLite rebuilds a table to change its constraints (0005: run_kernels, which candidates and
                # llm_calls point at): foreign keys are off while it does, and checked whole at the end. The pragma
                # acts only outside a transaction: it is the first statement here.
                connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            command.upgrade(_alembic_config(connection), "head")
            if sqlite:
                broken = connection.exec_driver_sql("PRAGMA foreign_key_check").first()
                if broken is not None:
                    raise DatabaseError(
                        f"migrating {database.display_url} left a row of {broken[0]} pointing at nothing in "
                        f"{broken[2]}; the database before the migration is at {backup}"
                    )
        if sqlite:
            database.engine.dispose()  # the connection that migrated has foreign keys off: never reused
    return backup


def _refuse_newer(database: Database, revision: str | None, known: set[str]) -> None:
    if revision is not None and revision not in known:
        raise DatabaseError(
            f"the database {database.display_url} has schema revision {revision}, written by a newer kernel-agent; "
            "upgrade kernel-agent (pip install -U kernel-agent) or pass another --db"
        )


@contextmanager
def _migration_lock(database: Database) -> Iterator[None]:
    """Serialise migrations of one SQLite file across processes (PostgreSQL uses an advisory lock).

    The lock is a flock on the file's folder: no extra file, and never a second descriptor on the
    database file itself (closing one would drop SQLite's own POSIX locks in this process).
    """
    path = database.path
    if path is None:
        yield
        return
    try:
        descriptor = os.open(path.parent, os.O_RDONLY)
    except OSError:  # a folder the user may write but not list: SQLite's own locks are all there is
        yield
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the flock


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
