"""The engine's asyncio handle on its database: an ``AsyncEngine`` beside a :class:`Database`.

An application written with asyncio reaches Kickside through an :class:`AsyncDatabase`:
SQLAlchemy's asyncio extension over psycopg's async driver on PostgreSQL and aiosqlite on
SQLite. It holds no SQL of its own. Every rule (each statement, its row mapping, the decisions
between statements) is the sync engine's, run on the async connection through SQLAlchemy's
``AsyncConnection.run_sync``: the sync function gets a ``Connection`` whose every statement
goes out on the async driver (the greenlet bridge SQLAlchemy's own async ``execute`` uses), so
the event loop is never blocked and the sync code path costs exactly what it did.

The handle's :attr:`AsyncDatabase.db` is the sync side of it: a :class:`Database` over the async
engine's ``sync_engine``, giving the tables of the schema (statements are schema-qualified, as
the sync handle's are), the dialect, and the same in-process wake signal as a sync handle on the
same URL. Its own ``begin()``/``read()`` cannot be used (they would connect without the event
loop); :meth:`AsyncDatabase.begin` and :meth:`AsyncDatabase.read` are their async twins.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import URL

from kickside_engine.config import resolve_database_config
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.store.database import Database, translate_errors
from kickside_engine.store.engines import READ_ONLY_OPTION, create_owned_async_engine
from kickside_engine.store.notify import local_signal
from kickside_engine.store.revisions import check_schema

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

__all__ = ["AsyncDatabase", "connect_async_database", "connection_of"]

T = TypeVar("T")


class AsyncDatabase:
    """A configured Kickside database for asyncio applications.

    Build it with :func:`connect_async_database` (Kickside creates and owns the async engine)
    or hand the application's own ``AsyncEngine`` to the constructor, used as it is.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        schema: str | None = None,
        owns_engine: bool = False,
        url: URL | None = None,
    ) -> None:
        shown = url if url is not None else engine.url
        if shown.drivername == "sqlite+aiosqlite":
            shown = shown.set(drivername="sqlite")
        self.engine = engine
        #: The sync side: tables, dialect and wake signal, for the statements run on ``engine``.
        self.db = Database(engine.sync_engine, schema=schema, url=shown)
        self.schema = schema
        self._owns_engine = owns_engine

    @property
    def is_postgresql(self) -> bool:
        return self.db.is_postgresql

    @property
    def is_sqlite(self) -> bool:
        return self.db.is_sqlite

    def display_url(self) -> str:
        """The database URL with its password masked."""
        return self.db.display_url()

    async def require_current_schema(self) -> None:
        """Raise :class:`MigrationError` unless this Kickside runs on the database's schema
        (checked once per handle, as :meth:`Database.require_current_schema` does)."""
        if self.db.schema_is_current:
            return
        async with self.read(check_schema=False) as conn:
            current, problem = await conn.run_sync(check_schema, self.schema)
        if problem is not None:
            raise problem
        self.db.schema_verified(current)

    @contextlib.asynccontextmanager
    async def begin(self, *, check_schema: bool = True) -> AsyncIterator[AsyncConnection]:
        """An async connection in a write transaction, committed on success, rolled back on
        error (``BEGIN IMMEDIATE`` on SQLite, as :meth:`Database.begin`)."""
        if check_schema:
            await self.require_current_schema()
        with translate_errors(self.db):
            async with self.engine.begin() as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def read(self, *, check_schema: bool = True) -> AsyncIterator[AsyncConnection]:
        """An async connection in a read-only transaction (a deferred one on SQLite)."""
        if check_schema:
            await self.require_current_schema()
        with translate_errors(self.db):
            async with self.engine.connect() as conn:
                conn = await conn.execution_options(**{READ_ONLY_OPTION: True})
                async with conn.begin():
                    yield conn

    async def run(
        self,
        work: Callable[[Connection], T],
        *,
        conn: AsyncConnection | AsyncSession | None = None,
        read: bool = False,
    ) -> T:
        """Run ``work`` (a sync function of a ``Connection``: the engine's one implementation)
        on ``conn``, the caller's transaction (neither committed nor rolled back here), or in a
        transaction of this call's own: a read with ``read=True``, else a write, after whose
        commit this process's pools are woken (work that ran inside it woke them too early to
        see it on SQLite)."""
        if conn is not None:
            caller = await connection_of(conn)
            with translate_errors(self.db):
                return await caller.run_sync(work)
        if read:
            async with self.read() as own:
                return await own.run_sync(work)
        async with self.begin() as own:
            result = await own.run_sync(work)
        local_signal(self.db).wake()
        return result

    def sync_database(self) -> Database:
        """A sync handle on the same database and schema, with an engine of its own (what a
        worker pool or a drain runs on); dispose of it when done."""
        url = self.engine.url
        if url.drivername == "sqlite+aiosqlite":
            url = url.set(drivername="sqlite")
        return Database.from_url(url, schema=self.schema)

    async def dispose(self) -> None:
        """Close pooled connections if Kickside created the engine, and the wake-up senders
        (:meth:`Database.dispose`)."""
        if self._owns_engine:
            await self.engine.dispose()
        self.db.dispose()  # not the engine's owner: only the senders

    def __repr__(self) -> str:
        return f"AsyncDatabase({self.display_url()!r}, schema={self.schema!r})"


async def connection_of(conn: AsyncConnection | AsyncSession) -> AsyncConnection:
    """The ``AsyncConnection`` of the caller's transaction: ``conn`` itself, or the one an
    ``AsyncSession`` runs its transaction on (begun now when it has none yet)."""
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    if isinstance(conn, AsyncConnection):
        return conn
    if isinstance(conn, AsyncSession):
        return await conn.connection()
    raise InvalidArgumentError(
        f"conn must be an AsyncConnection or AsyncSession, got {type(conn).__name__}"
    )


def connect_async_database(
    url: str | URL | None = None,
    *,
    schema: str | None = None,
    engine: AsyncEngine | None = None,
    pool_size: int = 5,
    create: bool = True,
    pooled: bool = True,
) -> AsyncDatabase:
    """Open Kickside's database for asyncio from a URL (or the environment), or wrap a host's
    ``AsyncEngine``.

    The URL is the one the sync API takes (``sqlite:///PATH``, ``postgresql+psycopg://...``,
    resolved by the same precedence path); the async driver is chosen from it. ``pooled=False``
    opens a connection per transaction (for tests that run each case on an event loop of its
    own). Missing async drivers are a :class:`ConfigurationError` naming the ``async`` extra.
    """
    if engine is not None:
        return AsyncDatabase(engine, schema=schema)
    config = resolve_database_config(url, schema=schema)
    owned = create_owned_async_engine(config, pool_size=pool_size, create=create, pooled=pooled)
    return AsyncDatabase(owned, schema=config.schema, owns_engine=True, url=config.url)
