"""Creating the SQLAlchemy engine Kickside owns: one per dialect, tuned for the engine's work.

SQLite runs in WAL mode with a busy timeout of :data:`SQLITE_BUSY_TIMEOUT_MS`, foreign keys on,
the ``synchronous`` mode the URL or the environment chose
(:mod:`~kickside_engine.store.sqlite_durability`), and write transactions started with
``BEGIN IMMEDIATE`` (a read transaction, marked with the :data:`READ_ONLY_OPTION` execution
option, starts a deferred ``BEGIN``). PostgreSQL gets a
bounded pool, a connect timeout and the ``kickside`` application name. An engine the host
application hands over is used as it is (:class:`~kickside_engine.store.database.Database`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL
from sqlalchemy.exc import NoSuchModuleError

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

from kickside_engine.config import DatabaseConfig
from kickside_engine.errors import ConfigurationError
from kickside_engine.store.sqlite_durability import synchronous_mode, without_synchronous
from kickside_engine.store.sqlite_file import check_sqlite_file

SQLITE_BUSY_TIMEOUT_MS = 30_000
#: The execution option marking a connection's transaction as a read (a deferred ``BEGIN`` on
#: SQLite rather than ``BEGIN IMMEDIATE``).
READ_ONLY_OPTION = "kickside_read_only"


def create_owned_engine(config: DatabaseConfig, *, pool_size: int, create: bool) -> Engine:
    """A new engine for ``config``'s database (a SQLite file is checked, or created unless
    ``create=False``, first: :func:`check_sqlite_file`)."""
    if config.dialect == "sqlite":
        check_sqlite_file(config.url, create=create)
        return _create_sqlite_engine(config.url)
    try:
        return create_engine(
            config.url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_recycle=1800,
            pool_use_lifo=True,
            connect_args={"connect_timeout": 10, "application_name": "kickside"},
        )
    except (NoSuchModuleError, ModuleNotFoundError):  # an unknown driver, or psycopg missing
        raise ConfigurationError(
            f"no driver for {config.display_url()}: PostgreSQL needs psycopg, which the postgres "
            "extra installs: pip install 'kickside[postgres]'"
        ) from None


def create_owned_async_engine(
    config: DatabaseConfig, *, pool_size: int, create: bool, pooled: bool = True
) -> AsyncEngine:
    """An asyncio engine for ``config``'s database, tuned as :func:`create_owned_engine` tunes
    a sync one: psycopg's async driver on PostgreSQL, aiosqlite on SQLite (whose connections
    get the same pragmas and ``BEGIN IMMEDIATE`` writes).

    ``pooled=False`` opens a connection per transaction (``NullPool``): nothing outlives the
    event loop that used it, as a test that runs each case on a loop of its own needs.
    """
    try:
        from sqlalchemy.ext.asyncio import create_async_engine
        from sqlalchemy.pool import NullPool

        options: dict[str, Any] = {} if pooled else {"poolclass": NullPool}
        if config.dialect == "sqlite":
            check_sqlite_file(config.url, create=create)
            engine = create_async_engine(
                without_synchronous(config.url).set(drivername="sqlite+aiosqlite"),
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
                **options,
            )
            tune_sqlite_engine(engine.sync_engine, synchronous_mode(config.url))
            return engine
        if pooled:
            options.update(pool_size=pool_size, max_overflow=pool_size, pool_recycle=1800)
        return create_async_engine(
            config.url,
            connect_args={"connect_timeout": 10, "application_name": "kickside"},
            **options,
        )
    except (NoSuchModuleError, ImportError) as exc:
        # greenlet (SQLAlchemy's asyncio bridge), aiosqlite or psycopg missing
        missing = getattr(exc, "name", None) or str(exc)
        extra = "postgres" if missing.startswith("psycopg") else "async"
        raise ConfigurationError(
            f"the async API on {config.display_url()} needs {missing}, which the {extra} extra "
            f"installs: pip install 'kickside[{extra}]'"
        ) from None


def _create_sqlite_engine(url: URL) -> Engine:
    """A SQLite engine whose connections use WAL, a busy timeout, foreign keys and the chosen
    synchronous mode, and whose write transactions take the write lock up front."""
    engine = create_engine(
        without_synchronous(url),
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        # The connection returned last is handed out next. A SQLite connection drops its page
        # cache when it finds that another connection wrote since its last transaction, so
        # work done one transaction after another (a pool's turns, a loop of enqueues) kept
        # re-reading the pages it had just written when the pool handed out its connections
        # in turn.
        pool_use_lifo=True,
    )
    tune_sqlite_engine(engine, synchronous_mode(url))
    return engine


def tune_sqlite_engine(engine: Engine, synchronous: str) -> None:
    """Give a SQLite engine's connections WAL, a busy timeout, foreign keys and the
    ``synchronous`` mode, and its write transactions ``BEGIN IMMEDIATE`` (an async engine:
    pass its ``sync_engine``)."""
    synchronous = synchronous.upper()

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN is ours to emit (below).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA synchronous={synchronous}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock up front: a deferred transaction that reads, then writes,
        # fails with SQLITE_BUSY instead of waiting when another writer got there first.
        if conn.get_execution_options().get(READ_ONLY_OPTION):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
