"""The engine's handle on its database: one SQLAlchemy engine, one schema, one dialect.

A :class:`Database` is built from a URL (the engine then owns the SQLAlchemy engine and tunes
it: SQLite in WAL mode with a busy timeout, foreign keys on, and write transactions started with
``BEGIN IMMEDIATE``) or from the host application's own SQLAlchemy ``Engine``, in which case
Kickside uses it as it is, so runtime SQL follows the host's database mapping.

The first transaction on a handle checks that this Kickside runs on the schema
(:meth:`Database.require_current_schema`), once: a schema older than the oldest this code runs
on, or a newer one that does not accept this code (expand/contract,
:mod:`~kickside_engine.store.revisions`), is refused with a :class:`MigrationError` before
anything is read or written.

Creating and tuning an owned engine lives in :mod:`~kickside_engine.store.engines`; reading
driver errors (:func:`translate_errors`, :func:`unavailable_reason`, re-exported here) in
:mod:`~kickside_engine.store.driver_errors`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Column, Connection, Engine, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.exc import StatementError
from sqlalchemy.pool import QueuePool

from kickside_engine.config import display_url, resolve_database_config
from kickside_engine.errors import ConfigurationError
from kickside_engine.store.driver_errors import driver_error, translate_errors, unavailable_reason
from kickside_engine.store.engines import READ_ONLY_OPTION, create_owned_engine
from kickside_engine.store.kept_connection import KeptConnection
from kickside_engine.store.revisions import check_schema, revision_at_least
from kickside_engine.store.sqlite_file import sqlite_path
from kickside_engine.store.tables import Tables, build_tables
from kickside_engine.store.wake_sockets import close_senders, wake_folder

__all__ = ["Database", "connect_database", "translate_errors", "unavailable_reason"]


class Database:
    """A configured Kickside database.

    Use :meth:`from_url` to let Kickside create and own the SQLAlchemy engine, or pass the host
    application's ``Engine`` to the constructor.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        schema: str | None = None,
        owns_engine: bool = False,
        url: URL | None = None,
    ):
        dialect = engine.dialect.name
        if dialect not in ("sqlite", "postgresql"):
            raise ConfigurationError(f"unsupported database {dialect!r}: use SQLite or PostgreSQL")
        if schema is not None and dialect != "postgresql":
            raise ConfigurationError("a schema name is only supported on PostgreSQL")
        self.engine = engine
        self.schema = schema
        self.dialect: str = dialect
        self.tables: Tables = build_tables(schema)
        self._owns_engine = owns_engine
        # Rendered once: every enqueue looks up this process's wake signal by it. ``url``: the
        # one the application gave, when ``engine`` is an adaptation of it (an async engine's
        # ``sync_engine`` runs sqlite+aiosqlite), so both handles share one signal.
        self._display_url = display_url(url if url is not None else engine.url)
        self._schema_current = False
        #: The revision the schema was at when this handle last checked it.
        self.schema_revision: str | None = None
        self._on_dispose: list[Callable[[], None]] = []
        #: The connection single autocommitted statements use on a SQLite file this handle
        #: opened (:meth:`execute_autocommit`).
        self._kept_connection = (
            KeptConnection(engine)
            if owns_engine and dialect == "sqlite" and isinstance(engine.pool, QueuePool)
            else None
        )

    @classmethod
    def from_url(
        cls,
        url: str | URL | None = None,
        *,
        schema: str | None = None,
        pool_size: int = 5,
        create: bool = True,
    ) -> Database:
        """Create a database handle from a URL (see :mod:`kickside_engine.config`).

        A SQLite file is checked first (:func:`check_sqlite_file`): a directory, a file that is
        not a SQLite database or a folder that cannot be made is a :class:`ConfigurationError`
        naming the path. ``create=False`` refuses a file that does not exist instead of creating
        it (tools that only read must not leave an empty database behind a mistyped path).
        """
        config = resolve_database_config(url, schema=schema)
        return cls(
            create_owned_engine(config, pool_size=pool_size, create=create),
            schema=config.schema,
            owns_engine=True,
        )

    @property
    def is_postgresql(self) -> bool:
        return self.dialect == "postgresql"

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    def display_url(self) -> str:
        """The database URL with its password masked."""
        return self._display_url

    def require_current_schema(self) -> None:
        """Raise :class:`MigrationError` unless this Kickside runs on the database's schema.

        It runs on a schema from its :data:`~kickside_engine.store.revisions.OLDEST_SCHEMA` up
        to its head, and on a newer one whose migrations accept this code's head (expand/
        contract). Checked once per handle: after a check passed, this (and the check every
        transaction makes through it) costs an attribute read. A failed check is not
        remembered, so a handle works as soon as the schema is migrated.
        """
        if self._schema_current:
            return
        with self.read(check_schema=False) as conn:
            current, problem = check_schema(conn, self.schema)
        self.schema_revision = current
        if problem is not None:
            raise problem
        self._schema_current = True

    @property
    def schema_is_current(self) -> bool:
        """Whether a check found a schema this code runs on (then
        :meth:`require_current_schema` is free)."""
        return self._schema_current

    def schema_verified(self, revision: str | None) -> None:
        """Record that the schema was just found at ``revision``, one this code runs on
        (spares this handle its own check)."""
        self.schema_revision = revision
        self._schema_current = True

    def has_column(self, column: Column[Any]) -> bool:
        """Whether the schema has ``column`` (one added by a migration newer than the oldest
        schema this code runs on carries ``info={"since": revision}``)."""
        since = column.info.get("since")
        if since is None:
            return True
        self.require_current_schema()
        return revision_at_least(self.schema_revision, since)

    def has_table(self, table: Table) -> bool:
        """Whether the schema has ``table`` (one added by a migration newer than the oldest
        schema this code runs on carries ``info={"since": revision}``)."""
        since = table.info.get("since")
        if since is None:
            return True
        self.require_current_schema()
        return revision_at_least(self.schema_revision, since)

    def schema_changed(self) -> None:
        """Forget the schema check (after a migration): the next transaction checks again."""
        self._schema_current = False

    @contextlib.contextmanager
    def begin(self, *, check_schema: bool = True) -> Iterator[Connection]:
        """A connection in a write transaction, committed on success, rolled back on error.

        ``check_schema=False`` skips :meth:`require_current_schema` (for migrations, which work
        on a schema that is not current yet).
        """
        if check_schema and not self._schema_current:
            self.require_current_schema()
        with translate_errors(self), self.engine.begin() as conn:
            yield conn

    @contextlib.contextmanager
    def transaction(self, conn: Connection | None = None) -> Iterator[Connection]:
        """``conn``, the caller's connection in its own transaction (neither committed nor
        rolled back here), or else a write transaction of this call's own (:meth:`begin`).

        The one spelling of "use the caller's transaction, or begin one" that every public
        function taking ``conn=None`` follows.
        """
        if conn is not None:
            yield conn
            return
        with self.begin() as own:
            yield own

    @contextlib.contextmanager
    def autocommit(self) -> Iterator[Connection]:
        """A connection on which each statement commits by itself (one round trip, no BEGIN).

        For single statements that must be atomic on their own; never for a sequence that must
        commit together (that is :meth:`begin`).
        """
        if not self._schema_current:
            self.require_current_schema()
        with translate_errors(self), self.engine.connect() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    def execute_autocommit(self, statement: str, params: Mapping[str, Any] | Sequence[Any]) -> None:
        """Run one driver-level statement that commits by itself.

        The hot-path twin of :meth:`autocommit` for one statement whose result is not needed:
        ``statement``, in the driver's style (psycopg's ``%(name)s``, sqlite3's ``:name`` or
        ``?``), goes straight to the driver on a pooled connection, skipping the
        ``Connection`` layer's per-call work (execution context, isolation level set and reset,
        result setup, and on SQLite the ``BEGIN IMMEDIATE`` and ``COMMIT`` round of a
        transaction for one statement). ``params`` go to the driver as they are: convert them
        as the columns' types would first. On PostgreSQL the statement runs in psycopg's
        autocommit mode, and psycopg prepares it server-side once it has run a few times on a
        connection. On SQLite one statement outside a transaction is a transaction of its own,
        which waits for the write lock as ``BEGIN IMMEDIATE`` does (busy timeout included); on a
        host's connection that opens transactions implicitly it is committed at once.

        The connection comes from ``engine.raw_connection()``, so the pool's size, recycling,
        pre-ping and checkout/checkin events apply; the engine's execution events
        (``before_cursor_execute``, ``handle_error``) and its ``echo`` log do not see the
        statement. On a SQLite file whose engine this handle created, one pooled connection is
        kept checked out for them (a checkout and return cost a sixth of a single enqueue's
        time); a call while another thread uses it takes one from the pool as usual, and
        :meth:`dispose` (or the engine's) closes it. Driver errors are wrapped in SQLAlchemy's
        exceptions and translated as in :meth:`autocommit`; the connection goes back to the
        pool in the mode it came in, or is discarded when its state is unknown.
        """
        if self.engine.dialect.is_async:
            raise ConfigurationError("execute_autocommit needs a synchronous engine")
        if not self._schema_current:
            self.require_current_schema()
        dialect = self.engine.dialect
        dbapi_error = dialect.loaded_dbapi.Error

        def wrapped(exc: Exception, sql: str | None, invalidated: bool) -> StatementError:
            return driver_error(self.engine, exc, sql, params, invalidated=invalidated)

        kept = self._kept_connection
        if kept is not None and not kept.take():
            kept = None  # another thread is using it: take a pooled one
        with translate_errors(self):
            try:
                raw = kept.connection() if kept is not None else self.engine.raw_connection()
            except BaseException as exc:
                if kept is not None:
                    kept.give_back()
                if isinstance(exc, dbapi_error):
                    raise wrapped(exc, None, dialect.is_disconnect(exc, None, None)) from exc
                raise
            driver: Any = raw.driver_connection
            switch = self.is_postgresql and not driver.autocommit
            try:
                if switch:
                    driver.autocommit = True
                cursor = driver.cursor()
                try:
                    cursor.execute(statement, params)
                finally:
                    cursor.close()
                if not self.is_postgresql and driver.in_transaction:
                    driver.commit()  # a host's sqlite3 connection began one implicitly
            except dbapi_error as exc:
                disconnect = dialect.is_disconnect(exc, driver, None)
                if disconnect:
                    raw.invalidate(exc)  # closed: never handed out again
                raise wrapped(exc, statement, disconnect) from exc
            except BaseException as exc:
                raw.invalidate(exc)  # interrupted mid-statement: the connection's state is unknown
                raise
            finally:
                if kept is not None:
                    kept.give_back()
                else:
                    _check_in(raw, dbapi_error, restore_transactions=switch)

    @contextlib.contextmanager
    def read(self, *, check_schema: bool = True) -> Iterator[Connection]:
        """A connection in a read-only transaction (a deferred one on SQLite).

        ``check_schema=False`` skips :meth:`require_current_schema`, as for :meth:`begin`.
        """
        if check_schema and not self._schema_current:
            self.require_current_schema()
        with translate_errors(self), self.engine.connect() as conn:
            conn = conn.execution_options(**{READ_ONLY_OPTION: True})
            with conn.begin():
                yield conn

    def upsert_insert(self, table: Table) -> Any:
        """An INSERT of this dialect, which supports ``on_conflict_do_nothing/do_update``."""
        return postgresql.insert(table) if self.is_postgresql else sqlite.insert(table)

    def on_dispose(self, callback: Callable[[], None]) -> None:
        """Have :meth:`dispose` call ``callback``: what keeps a connection or a thread of its
        own for this handle lets go of it there."""
        self._on_dispose.append(callback)

    def dispose(self) -> None:
        """Close pooled connections if Kickside created the engine, the connection that hears
        awaited jobs end (:func:`~kickside_engine.waiting.wait_for`; at once when no wait uses
        it, else with the last wait), and on a SQLite file this process's sockets that send
        wake-ups to other processes' pools (a later use opens each again)."""
        for callback in self._on_dispose:
            callback()
        if self._owns_engine:  # the kept connection, if any, closes with its engine
            self.engine.dispose()
        if self.is_sqlite and (path := sqlite_path(self.engine.url)) is not None:
            close_senders(wake_folder(path))

    def __repr__(self) -> str:
        return f"Database({self.display_url()!r}, schema={self.schema!r})"


def _check_in(raw: Any, dbapi_error: type[Exception], *, restore_transactions: bool) -> None:
    """Return a raw pooled connection, out of autocommit again if it came in that way."""
    if restore_transactions and raw.is_valid:
        try:
            raw.driver_connection.autocommit = False
        except dbapi_error as exc:
            raw.invalidate(exc)
    raw.close()


def connect_database(
    url: str | URL | None = None,
    *,
    schema: str | None = None,
    engine: Engine | None = None,
    create: bool = True,
) -> Database:
    """Open Kickside's database from a URL (or the environment), or wrap a host's engine.

    ``create=False``: a SQLite file that does not exist is a :class:`ConfigurationError`
    rather than a new, empty database (see :meth:`Database.from_url`).
    """
    if engine is not None:
        return Database(engine, schema=schema)
    return Database.from_url(url, schema=schema, create=create)
