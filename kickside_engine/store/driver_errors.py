"""Reading driver errors: which ones an operator can act on, and which mean an outage.

:func:`translate_errors` turns the driver errors a user can act on (the database unreachable,
credentials refused, a read-only role or file, a file that is not a database) into Kickside's
errors; :func:`unavailable_reason` tells the callers that retry (pools, plugins, scripts)
whether an error means the database cannot be used right now. psycopg and sqlite3 are read by
module name, so neither driver is imported to classify the other's errors.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import DBAPIError, OperationalError, StatementError

from kickside_engine.errors import (
    AuthenticationError,
    ConfigurationError,
    DatabaseUnavailableError,
    PermissionDeniedError,
)
from kickside_engine.store import engines

if TYPE_CHECKING:
    from sqlalchemy import Connection, Engine

    from kickside_engine.store.database import Database


def driver_error(
    engine: Engine,
    exc: Exception,
    sql: str | None,
    params: Mapping[str, Any] | Sequence[Any] | None,
    *,
    invalidated: bool,
) -> StatementError:
    """A driver's error from a statement run on the driver directly (not through a
    ``Connection``), as the ``Connection`` layer would have raised it: SQLAlchemy's exception
    class for it, the engine's ``hide_parameters`` respected."""
    dialect = engine.dialect
    return DBAPIError.instance(
        sql,
        params if sql is not None else None,
        exc,
        dialect.loaded_dbapi.Error,
        hide_parameters=engine.hide_parameters,
        connection_invalidated=invalidated,
        dialect=dialect,
    )


def connection_error(
    conn: Connection, exc: Any, sql: str, params: Mapping[str, Any], cursor: Any = None
) -> StatementError:
    """:func:`driver_error` for a statement run on ``conn``'s driver connection, with whether
    the error disconnected it."""
    invalidated = conn.dialect.is_disconnect(exc, conn.connection, cursor)
    return driver_error(conn.engine, exc, sql, params, invalidated=invalidated)


@contextlib.contextmanager
def translate_errors(db: Database | None = None) -> Iterator[None]:
    """Turn driver errors an operator can act on into Kickside errors.

    "Cannot reach the database" becomes :class:`DatabaseUnavailableError`: only a connection
    that could not be made or was lost, since callers (and scripts, on exit code 5) retry it.
    Credentials the server refused (a wrong user or password, no pg_hba.conf entry) are an
    :class:`AuthenticationError` instead: retrying cannot help.
    A SQLite file another writer kept locked past the busy timeout is a
    :class:`DatabaseUnavailableError` too: nothing is wrong but the wait, and a retry once the
    lock is free succeeds. A write refused because the role (or the SQLite file) is read-only
    becomes :class:`PermissionDeniedError`; a SQLite file that is not a database, a
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
        if isinstance(exc, OperationalError) and _is_locked(exc.orig):
            where = db.display_url() if db is not None else "the SQLite file"
            seconds = engines.SQLITE_BUSY_TIMEOUT_MS / 1000
            raise DatabaseUnavailableError(
                f"{where} stayed locked by another writer past the busy timeout "
                f"({seconds:g} s): {_first_line(exc.orig)}"
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
