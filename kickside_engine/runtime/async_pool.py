"""An embedded worker pool for asyncio applications: ``async with AsyncWorkerPool(...)``.

The supervised pool (:class:`~kickside_engine.runtime.pool.WorkerPool`) runs its loop on a
thread of its own and its jobs in executor processes; nothing of it runs on the application's
event loop. Starting it (migrations checked, node registered, executors spawned) and stopping
it (running jobs given the shutdown grace) block, so both run in a worker thread
(``asyncio.to_thread``) and the application's loop keeps serving meanwhile. In a FastAPI or
Starlette lifespan::

    @contextlib.asynccontextmanager
    async def lifespan(app):
        async with AsyncWorkerPool(adb, PoolConfig(app="myapp.jobs", queues={"default": 4})):
            yield

The pool object may be built when a module is imported: the pool itself is only made by
:meth:`AsyncWorkerPool.start`. Executors are spawned processes that import the application's
main module again, so a module that *starts* a pool at import time is refused with the same
:class:`~kickside_engine.errors.ConfigurationError` a sync pool raises (``main_not_guarded``);
a lifespan starts it only when the server runs, which is never during that import.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

from sqlalchemy.engine import URL

from kickside_engine.errors import InvalidArgumentError
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.runtime.pool import WorkerPool
from kickside_engine.store.async_database import AsyncDatabase
from kickside_engine.store.database import Database


class AsyncWorkerPool:
    """A supervised worker pool started and stopped from asyncio code (an async context
    manager); the pool runs beside the event loop, never on it.

    ``database``: an :class:`AsyncDatabase` (the pool opens a sync handle of its own on the
    same database and schema, disposed of when it stops), a sync :class:`Database` (used as
    it is), or a URL (with ``schema``).
    """

    def __init__(
        self,
        database: AsyncDatabase | Database | str | URL,
        config: PoolConfig,
        *,
        schema: str | None = None,
    ) -> None:
        if not isinstance(database, AsyncDatabase | Database | str | URL):
            raise InvalidArgumentError(
                "AsyncWorkerPool takes an AsyncDatabase, a Database or a database URL, got "
                f"{type(database).__name__}"
            )
        if not isinstance(config, PoolConfig):
            raise InvalidArgumentError(f"config must be a PoolConfig, got {config!r}")
        self._database = database
        self._schema = schema
        self.config = config
        #: The running pool, between :meth:`start` and :meth:`stop` (None otherwise).
        self.pool: WorkerPool | None = None
        self._owned: Database | None = None

    def _open(self) -> Database:
        source = self._database
        if isinstance(source, Database):
            return source
        if isinstance(source, AsyncDatabase):
            self._owned = source.sync_database()
        else:
            self._owned = Database.from_url(source, schema=self._schema)
        return self._owned

    def _start(self) -> WorkerPool:
        db = self._open()
        try:
            pool = WorkerPool(db, self.config)
            pool.start()
        except BaseException:
            self._close()
            raise
        return pool

    def _stop(self, pool: WorkerPool, timeout: float | None) -> None:
        try:
            pool.stop(timeout)
        finally:
            self._close()

    def _close(self) -> None:
        if self._owned is not None:
            self._owned.dispose()
            self._owned = None

    async def start(self) -> None:
        """Start the pool; returns once it is ready. Raises what
        :meth:`WorkerPool.start` raises (:class:`MigrationError`, :class:`PermissionDeniedError`,
        :class:`PoolFailedError`), in the caller's task."""
        if self.pool is not None:
            raise InvalidArgumentError("this AsyncWorkerPool is running already")
        self.pool = await asyncio.to_thread(self._start)

    async def stop(self, timeout: float | None = None) -> None:
        """Stop gracefully: claims end, running jobs get the config's ``shutdown_grace``.

        Raises :class:`PoolFailedError` when the pool had stopped on an error of its own.
        """
        pool, self.pool = self.pool, None
        if pool is not None:
            await asyncio.to_thread(self._stop, pool, timeout)

    async def __aenter__(self) -> AsyncWorkerPool:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def __repr__(self) -> str:
        state = "running" if self.pool is not None else "stopped"
        return f"AsyncWorkerPool({self.config.queues!r}, {state})"
