"""The engine's handle on its database: one SQLAlchemy engine, one schema, one dialect.

A :class:`Database` is built from a URL (the engine then owns the SQLAlchemy engine and tunes
it: SQLite in WAL mode with a busy timeout, foreign keys on, and write transactions started with
``BEGIN IMMEDIATE``) or from the host application's own SQLAlchemy ``Engine``, in which case
Kickside uses it as it is, so runtime SQL follows the host's database mapping.

The first transaction on a handle checks that the schema is at this Kickside's head revision
(:meth:`Database.require_current_schema`), once: a newer schema this code does not know, or an
old one, is refused with a :class:`MigrationError` before anything is read or written.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, NoSuchModuleError, OperationalError, StatementError

from kickside_engine.config import DatabaseConfig, display_url, resolve_database_config
from kickside_engine.errors import (
    AuthenticationError,
    ConfigurationError,
    DatabaseUnavailableError,
    PermissionDeniedError,
)
from kickside_engine.store.revisions import read_current, schema_problem
from kickside_engine.store.sqlite_file import check_sqlite_file
from kickside_engine.store.tables import Tables, build_tables

SQLITE_BUSY_TIMEOUT_MS = 30_000
_READ_ONLY = "kickside_read_only"


class Database:
    """A configured Kickside database.

    Use :meth:`from_url` to let Kickside create and own the SQLAlchemy engine, or pass the host
    application's ``Engine`` to the constructor.
    """

    def __init__(self, engine: Engine, *, schema: str | None = None, owns_engine: bool = False):
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
        # Rendered once: every enqueue looks up this process's wake signal by it.
        self._display_url = display_url(engine.url)
        self._schema_current = False

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
            _create_engine(config, pool_size=pool_size, create=create),
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
        """Raise :class:`MigrationError` unless the schema is at this Kickside's head revision.

        Checked once per handle: after a check passed, this (and the check every transaction
        makes through it) costs an attribute read. A failed check is not remembered, so a
        handle works as soon as the schema is migrated.
        """
        if self._schema_current:
            return
        with self.read(check_schema=False) as conn:
            current = read_current(conn, self.schema)
        problem = schema_problem(current)
        if problem is not None:
            raise problem
        self._schema_current = True

    def schema_verified(self) -> None:
        """Record that the schema was just found at head (spares this handle its own check)."""
        self._schema_current = True

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

    def execute_autocommit(self, statement: str, params: Mapping[str, Any]) -> None:
        """Run one driver-level statement that commits by itself (PostgreSQL only).

        The hot-path twin of :meth:`autocommit` for one statement whose result is not needed:
        ``statement`` (psycopg's ``%(name)s`` style) goes straight to the driver on a pooled
        connection in psycopg's autocommit mode, skipping the ``Connection`` layer's per-call
        work (execution context, isolation level set and reset, result setup). The connection
        comes from ``engine.raw_connection()``, so the pool's size, recycling, pre-ping and
        checkout/checkin events apply; the engine's execution events (``before_cursor_execute``,
        ``handle_error``) and its ``echo`` log do not see the statement. psycopg prepares it
        server-side once it has run a few times on a connection. Driver errors are wrapped in
        SQLAlchemy's exceptions and translated as in :meth:`autocommit`; the connection goes back
        to the pool in the mode it came in, or is discarded when its state is unknown.
        """
        if not self.is_postgresql:
            raise ConfigurationError("execute_autocommit runs on PostgreSQL only")
        if not self._schema_current:
            self.require_current_schema()
        dialect = self.engine.dialect
        dbapi_error = dialect.loaded_dbapi.Error

        def wrapped(exc: Exception, sql: str | None, invalidated: bool) -> StatementError:
            """The driver's error as the ``Connection`` layer would have raised it."""
            return DBAPIError.instance(
                sql,
                params if sql is not None else None,
                exc,
                dbapi_error,
                hide_parameters=self.engine.hide_parameters,
                connection_invalidated=invalidated,
                dialect=dialect,
            )

        with translate_errors(self):
            try:
                raw = self.engine.raw_connection()
            except dbapi_error as exc:
                raise wrapped(exc, None, dialect.is_disconnect(exc, None, None)) from exc
            driver: Any = raw.driver_connection
            switch = not driver.autocommit
            try:
                if switch:
                    driver.autocommit = True
                with driver.cursor() as cursor:
                    cursor.execute(statement, params)
            except dbapi_error as exc:
                disconnect = dialect.is_disconnect(exc, driver, None)
                if disconnect:
                    raw.invalidate(exc)  # closed: never handed out again
                raise wrapped(exc, statement, disconnect) from exc
            except BaseException as exc:
                raw.invalidate(exc)  # interrupted mid-statement: the connection's state is unknown
                raise
            finally:
                _check_in(raw, dbapi_error, restore_transactions=switch)

    @contextlib.contextmanager
    def read(self, *, check_schema: bool = True) -> Iterator[Connection]:
        """A connection in a read-only transaction (a deferred one on SQLite).

        ``check_schema=False`` skips :meth:`require_current_schema`, as for :meth:`begin`.
        """
        if check_schema and not self._schema_current:
            self.require_current_schema()
        with translate_errors(self), self.engine.connect() as conn:
            conn = conn.execution_options(**{_READ_ONLY: True})
            with conn.begin():
                yield conn

    def upsert_insert(self, table: Table) -> Any:
        """An INSERT of this dialect, which supports ``on_conflict_do_nothing/do_update``."""
        return postgresql.insert(table) if self.is_postgresql else sqlite.insert(table)

    def dispose(self) -> None:
        """Close pooled connections if Kickside created the engine."""
        if self._owns_engine:
            self.engine.dispose()

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


@contextlib.contextmanager
def translate_errors(db: Database | None = None) -> Iterator[None]:
    """Turn driver errors an operator can act on into Kickside errors.

    "Cannot reach the database" becomes :class:`DatabaseUnavailableError`: only a connection
    that could not be made or was lost, since callers (and scripts, on exit code 5) retry it.
    Credentials the server refused (a wrong user or password, no pg_hba.conf entry) are an
    :class:`AuthenticationError` instead: retrying cannot help.
    A write refused because the role (or the SQLite file) is read-only becomes
    :class:`PermissionDeniedError`; a SQLite file that is not a database, a
    :class:`ConfigurationError`. Any other driver error stays what it is: a failure.
    """
    try:
        yield
    except DBAPIError as exc:
        if _is_authentication_failure(exc.orig):
            where = db.display_url() if db is not None else "the database"
            raise AuthenticationError(
                f"authentication failed for {where}: {_first_line(exc.orig)} (check the user "
                "and password in the URL, and the server's pg_hba.conf; not an outage)"
            ) from exc
        if isinstance(exc, OperationalError) and _is_connection_failure(exc):
            where = db.display_url() if db is not None else "the database"
            raise DatabaseUnavailableError(
                f"cannot reach {where}: {_first_line(exc.orig)}"
            ) from exc
        if _is_permission_denied(exc):
            raise PermissionDeniedError(
                f"permission denied: {_first_line(exc.orig)} (a read-only database role or "
                "file can only run reads)"
            ) from exc
        if _is_not_a_database(exc):
            where = db.display_url() if db is not None else "the SQLite file"
            raise ConfigurationError(
                f"{where} is not a SQLite database: {_first_line(exc.orig)}"
            ) from exc
        raise


#: What libpq and the server say when they refuse credentials, in the connection error's
#: message: a failed connection carries no SQLSTATE in psycopg (28P01 invalid_password, 28000
#: invalid_authorization_specification on the server side), so the text is all there is.
_AUTHENTICATION_FAILED = re.compile(
    r"authentication failed"  # password, Ident, Peer, LDAP, RADIUS, GSSAPI, certificate
    r"|role \".*\" does not exist"
    r"|role \".*\" is not permitted to log in"
    r"|no pg_hba\.conf entry"
    r"|pg_hba\.conf rejects connection"
    r"|no password supplied"
)


def _is_authentication_failure(orig: BaseException | None) -> bool:
    """Whether a driver error means the server refused the credentials (psycopg only)."""
    if not type(orig).__module__.startswith("psycopg"):
        return False
    sqlstate = getattr(orig, "sqlstate", None)
    if sqlstate is not None:  # an error the server sent for a statement, with its class
        return str(sqlstate).startswith("28")
    return _AUTHENTICATION_FAILED.search(str(orig)) is not None


def _is_permission_denied(exc: DBAPIError) -> bool:
    orig = exc.orig
    if type(orig).__module__.startswith("psycopg"):
        return getattr(orig, "sqlstate", None) == "42501"  # insufficient_privilege
    return "attempt to write a readonly database" in str(orig)


def _is_not_a_database(exc: DBAPIError) -> bool:
    orig = exc.orig
    return type(orig).__module__.startswith("sqlite3") and "file is not a database" in str(orig)


def unavailable_reason(exc: BaseException) -> str | None:
    """Why the database cannot be used right now, if ``exc`` says it cannot; else None.

    It cannot when the connection was refused, dropped or never made (``exc`` a
    :class:`DatabaseUnavailableError`, a driver error SQLAlchemy wrapped, or a bare psycopg
    error from a connection of one's own), and when an SQLite file stayed locked by another
    writer past the busy timeout. Anything else (a bug, a refused permission, a constraint)
    is not an outage: retrying it cannot be expected to help by itself.
    """
    if isinstance(exc, DatabaseUnavailableError):
        return str(exc)
    if isinstance(exc, DBAPIError):
        if _is_connection_failure(exc) or _is_locked(exc.orig):
            return _first_line(exc.orig)
        return None
    if _is_driver_connection_failure(exc):
        return _first_line(exc)
    return None


def _is_locked(orig: BaseException | None) -> bool:
    """SQLite's "database is locked" (SQLITE_BUSY): a writer held the file past the busy
    timeout."""
    return type(orig).__module__.startswith("sqlite3") and "is locked" in str(orig)


def _is_connection_failure(exc: DBAPIError) -> bool:
    """Whether ``exc`` means the connection could not be made or was lost (nothing else)."""
    if exc.connection_invalidated:
        return True  # SQLAlchemy found the connection closed or broken
    return _is_driver_connection_failure(exc.orig, statement=exc.statement is not None)


def _is_driver_connection_failure(orig: BaseException | None, *, statement: bool = False) -> bool:
    """Whether a driver's own error means the connection failed (psycopg, sqlite3).

    ``statement``: the error came from running a statement on a connection SQLAlchemy did not
    find broken (a wrapped error); a bare error from a connection of one's own says neither.
    """
    module = type(orig).__module__
    if module.startswith("psycopg"):
        import psycopg

        if not isinstance(orig, psycopg.OperationalError):
            return False
        if _is_authentication_failure(orig):
            return False  # the server answered: it refused the credentials
        sqlstate = getattr(orig, "sqlstate", None)
        if sqlstate is None:
            # An error of the client library, not the server: connecting failed or the
            # connection broke, unless a statement was refused before it was sent (more than
            # 65,535 parameters, ...) on a connection that is fine.
            return not statement
        return str(sqlstate).startswith(("08", "57P", "3D000"))
    if module.startswith("sqlite3"):
        return "unable to open database" in str(orig)
    return False


def _first_line(orig: BaseException | None) -> str:
    text = str(orig or "").strip().splitlines()
    return text[0] if text else "connection failed"


def _create_engine(config: DatabaseConfig, *, pool_size: int, create: bool) -> Engine:
    if config.dialect == "sqlite":
        check_sqlite_file(config.url, create=create)
        return _create_sqlite_engine(config.url)
    try:
        return create_engine(
            config.url,
            pool_size=pool_size,
            max_overflow=pool_size,
            pool_recycle=1800,
            connect_args={"connect_timeout": 10, "application_name": "kickside"},
        )
    except NoSuchModuleError:
        raise ConfigurationError(
            f"no driver for {config.display_url()}: install psycopg (pip install 'psycopg[binary]')"
        ) from None


def _create_sqlite_engine(url: URL) -> Engine:
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the driver so BEGIN is ours to emit (below).
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        # Writers take the write lock up front: a deferred transaction that reads, then writes,
        # fails with SQLITE_BUSY instead of waiting when another writer got there first.
        if conn.get_execution_options().get(_READ_ONLY):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


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
