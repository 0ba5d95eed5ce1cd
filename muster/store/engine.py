"""Engines for SQLite and PostgreSQL with the transaction modes the store relies on, and
programmatic Alembic migrations.

Writers serialise on the global revision: on SQLite by ``BEGIN IMMEDIATE`` (the database
write lock is taken at BEGIN, so two writers never both read a revision and then collide at
COMMIT), on PostgreSQL by a row lock on the revision row (``SELECT ... FOR UPDATE``) under
READ COMMITTED. Readers that need one consistent view (a list and the revision it is valid
at, a watch batch and the revision it scanned to) run under snapshot isolation:
SQLite's deferred transactions in WAL mode, PostgreSQL's REPEATABLE READ.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError

__all__ = [
    "WriteTransaction",
    "is_postgres",
    "make_engine",
    "read_transaction",
    "upgrade",
    "write_transaction",
]

_MIGRATIONS = Path(__file__).parent / "migrations"
# Any constant works: it only has to be the same for every Muster process migrating one database.
_MIGRATION_LOCK_KEY = 0x6D757374
_WRITE = "muster_write"
_PING_AFTER_IDLE_SECONDS = 1.0


def make_engine(url: str, busy_timeout_s: float = 30.0) -> Engine:
    """An engine for ``url``: ``sqlite:///path[?synchronous=normal]`` or
    ``postgresql+psycopg://...``."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        synchronous = str(parsed.query.get("synchronous", "full")).upper()
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"sqlite synchronous must be full or normal, got {synchronous.lower()!r}")
        plain = parsed.difference_update_query(["synchronous"]).render_as_string(hide_password=False)
        return _sqlite_engine(plain, parsed.database, busy_timeout_s, synchronous)
    if parsed.get_backend_name() == "postgresql":
        return _postgres_engine(url)
    raise ValueError(
        f"unsupported store URL {url!r}: use sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB"
    )


def _postgres_engine(url: str) -> Engine:
    """A pooled PostgreSQL engine that pings a connection before handing it out only when it
    sat in the pool for :data:`_PING_AFTER_IDLE_SECONDS` (SQLAlchemy's ``pool_pre_ping`` pings
    at every checkout: a round trip, and an apply or a manager pass checks out several). A
    server restart leaves dead connections in an idle pool, which are found and replaced; one
    that dies while in use fails its statement, and SQLAlchemy then discards the whole pool."""
    engine = create_engine(url, pool_size=10, max_overflow=20)

    @event.listens_for(engine, "checkin")
    def _returned(_dbapi: Any, record: Any) -> None:
        record.info["returned"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi: Any, record: Any, _proxy: Any) -> None:
        returned = record.info.get("returned")
        if returned is None or time.monotonic() - returned < _PING_AFTER_IDLE_SECONDS:
            return  # just connected, or in use a moment ago
        try:
            engine.dialect.do_ping(dbapi)
        except Exception as exc:
            raise DisconnectionError(f"a pooled connection is dead ({exc})") from exc  # replaced, tried again

    return engine


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that holds the store's write lock from its first statement to COMMIT.

    On PostgreSQL the lock is the revision row's, taken by the caller's first statement
    (``SELECT ... FOR UPDATE``); on SQLite it is the database's, taken by BEGIN IMMEDIATE.
    """
    with engine.connect() as conn:
        conn = conn.execution_options(**{_WRITE: True})
        with conn.begin():
            yield conn


class WriteTransaction:
    """:func:`write_transaction` for a caller that ends it later, maybe after many calls (a
    batch of writes): takes ``lock`` (the store's in-process write lock), then begins; ``end``
    commits or rolls back, closes and releases. ``conn`` is the transaction's connection."""

    def __init__(self, engine: Engine, lock: AbstractContextManager[Any]) -> None:
        self._lock = lock
        lock.__enter__()
        try:
            self.conn = engine.connect().execution_options(**{_WRITE: True})
            try:
                self._trans = self.conn.begin()
            except BaseException:
                self.conn.close()
                raise
        except BaseException:
            lock.__exit__(None, None, None)
            raise

    def end(self, commit: bool) -> None:
        try:
            if commit:
                self._trans.commit()
            else:
                self._trans.rollback()
        finally:
            try:
                self.conn.close()
            finally:
                self._lock.__exit__(None, None, None)


@contextmanager
def read_transaction(engine: Engine) -> Iterator[Connection]:
    """A read-only transaction that sees one snapshot for all its statements."""
    with engine.connect() as conn:
        if is_postgres(engine):
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn


def upgrade(engine: Engine) -> None:
    """Apply every pending migration; safe when several processes start at once."""
    with write_transaction(engine) as conn:
        if is_postgres(engine):
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
        cfg = Config()
        cfg.set_main_option("script_location", str(_MIGRATIONS))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def _sqlite_engine(url: str, database: str | None, busy_timeout_s: float, synchronous: str) -> Engine:
    if not database or database == ":memory:":
        # Each pooled connection would get its own empty in-memory database.
        raise ValueError("the SQLite store needs a file: sqlite:///PATH")
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
        pool_size=10,
        max_overflow=20,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's begin hook emit BEGIN instead of the sqlite3 module's implicit one,
        # which would never be IMMEDIATE and would not cover SELECTs.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        # FULL (the default): a committed write survives a power cut, not only a crash of the
        # process; controllers act on what they read, so nothing they acted on may roll back.
        # `?synchronous=normal` trades that for several times the write rate (crash-safe still).
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        mode = "IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "DEFERRED"
        conn.exec_driver_sql(f"BEGIN {mode}")

    return engine
