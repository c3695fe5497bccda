"""Where Kickside's database is, resolved along one precedence path.

Precedence: an explicit argument (``--database-url``) > the ``KICKSIDE_DATABASE_URL``
environment variable > the embedded SQLite default. The same applies to the optional
PostgreSQL schema (``--schema`` > ``KICKSIDE_SCHEMA`` > none).

The embedded default is ``$KICKSIDE_HOME/kickside.sqlite3`` when ``KICKSIDE_HOME`` is set, else
``$XDG_DATA_HOME/kickside/kickside.sqlite3``, else ``~/.local/share/kickside/kickside.sqlite3``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from kickside_engine.errors import ConfigurationError
from kickside_engine.redact import is_sensitive_key

DATABASE_URL_ENV = "KICKSIDE_DATABASE_URL"
SCHEMA_ENV = "KICKSIDE_SCHEMA"
HOME_ENV = "KICKSIDE_HOME"

_MASK = "***"
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def default_sqlite_path() -> Path:
    """The embedded database file used when no URL is configured."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser() / "kickside.sqlite3"
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "kickside" / "kickside.sqlite3"


@dataclass(frozen=True)
class DatabaseConfig:
    """A resolved database location: a SQLAlchemy URL and an optional PostgreSQL schema."""

    url: URL
    schema: str | None = None

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self.url.get_backend_name()

    def display_url(self) -> str:
        """The URL with any password masked, safe to print or log."""
        return display_url(self.url)


def display_url(url: URL | str) -> str:
    """Render a database URL with its password replaced by ``***``.

    Query parameters that name a secret (``?password=...``, ``sslpassword``, ...) are masked
    too, since libpq takes the password from there as well.
    """
    if isinstance(url, str):
        try:
            url = make_url(url)
        except (ArgumentError, ValueError):
            return "<unparseable database URL>"
    masked = {k: _MASK for k in url.query if is_sensitive_key(k)}
    if not masked:
        return url.render_as_string(hide_password=True)
    rendered = url.update_query_dict(masked).render_as_string(hide_password=True)
    return rendered.replace(quote(_MASK, safe=""), "***")


def resolve_database_config(
    url: str | URL | None = None, *, schema: str | None = None
) -> DatabaseConfig:
    """Resolve the database URL and schema along the documented precedence path.

    Raises :class:`ConfigurationError` with a one-line reason for a URL that cannot be used;
    the message never contains the URL's password.
    """
    raw: str | URL | None = url if url not in (None, "") else os.environ.get(DATABASE_URL_ENV)
    if raw in (None, ""):
        path = default_sqlite_path()
        raw = URL.create("sqlite+pysqlite", database=str(path))
    parsed = _parse(raw)
    schema = schema if schema not in (None, "") else (os.environ.get(SCHEMA_ENV) or None)
    backend = parsed.get_backend_name()
    if schema is not None:
        if backend != "postgresql":
            raise ConfigurationError("a schema name is only supported on PostgreSQL")
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise ConfigurationError(
                f"invalid schema name {schema!r}: use lowercase letters, digits and underscores"
            )
    return DatabaseConfig(url=parsed, schema=schema)


def parse_database_url(raw: str | URL) -> URL:
    """Check a database URL Kickside can use (``postgres://`` and no driver mean psycopg).

    Raises :class:`ConfigurationError` with a one-line reason that never shows the password.
    """
    return _parse(raw)


def _parse(raw: str | URL) -> URL:
    if isinstance(raw, URL):
        parsed = raw
    else:
        try:
            parsed = make_url(raw)
        except (ArgumentError, ValueError):  # ValueError: a port that is not a number
            raise ConfigurationError(
                "invalid database URL: expected sqlite:///PATH or "
                "postgresql+psycopg://USER@HOST:PORT/DBNAME"
            ) from None
    if parsed.drivername == "postgres":
        parsed = parsed.set(drivername="postgresql+psycopg")
    backend = parsed.get_backend_name()
    driver = parsed.get_driver_name()
    if backend == "sqlite":
        if driver != "pysqlite":
            raise ConfigurationError(f"unsupported SQLite driver {driver!r}: use sqlite:///PATH")
        if parsed.database in (None, "", ":memory:"):
            raise ConfigurationError(
                "an in-memory SQLite database cannot be shared by a pool: use sqlite:///PATH"
            )
        return parsed
    if backend == "postgresql":
        if driver in ("psycopg2", "postgresql") or "+" not in parsed.drivername:
            parsed = parsed.set(drivername="postgresql+psycopg")
        elif driver != "psycopg":
            raise ConfigurationError(
                f"unsupported PostgreSQL driver {driver!r}: use postgresql+psycopg://"
            )
        if not parsed.database:
            raise ConfigurationError(f"the database URL {display_url(parsed)} names no database")
        return parsed
    raise ConfigurationError(
        f"unsupported database {backend!r}: Kickside runs on sqlite:/// and postgresql+psycopg://"
    )
