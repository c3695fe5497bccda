"""Hearing awaited jobs finish on PostgreSQL: the ``awaited`` flag and the final channel.

A waiter sets ``kickside_job.awaited`` (:func:`mark_awaited`); from then on the database's
trigger (migration 0012) notifies :func:`final_channel` with the job's id in the transaction
that makes it completed, cancelled or discarded, or deletes it. A job nobody waits for is never
notified, so the pools' settles pay nothing for waiters.

One listening connection serves every waiter of a handle in this process: for a
:class:`Database`, :class:`FinalWatch`, a daemon thread, started by the first waiter and
closed once no waiter has been registered for :data:`IDLE_SECONDS`; for an
:class:`AsyncDatabase`, :class:`AsyncFinalWatch`, a task of the event loop that lives while
waiters wait. Each waiter registers a callback for its job before it marks the job, so no
notification can fall between the two. Both reconnect with backoff when the connection is
lost, and call every registered callback once connected (notifications sent while it was down
are lost, so every waiter reads its job again).

``awaited`` is declared here, not on :mod:`~kickside_engine.store.tables`' job table: the
engine never reads it, and statements that read whole job rows must keep working on the
schemas before 0012 during a rolling upgrade.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import Boolean, Column, Connection, MetaData, String, Table, Uuid, false, update

from kickside_engine.ids import parse_uuid
from kickside_engine.models import FINAL_STATES
from kickside_engine.store.database import Database
from kickside_engine.store.notify import channel_name
from kickside_engine.store.reconnect import Outage

if TYPE_CHECKING:
    from kickside_engine.store.async_database import AsyncDatabase

log = logging.getLogger("kickside.wait")

#: How long a thread's listening connection stays open with no waiter registered.
IDLE_SECONDS = 30.0
#: How long a waiter waits for the listener to connect before it reads the job without it.
CONNECT_SECONDS = 5.0
_POLL_S = 0.25
_FINAL = sorted(state.value for state in FINAL_STATES)


def final_channel(db: Database) -> str:
    """The channel the trigger notifies when an awaited job is final or deleted: the
    schema's own channel (:func:`~kickside_engine.store.notify.channel_name`) with ``_final``."""
    return f"{channel_name(db)}_final"


@lru_cache(maxsize=16)
def awaited_table(schema: str | None) -> Table:
    """``kickside_job`` as far as waiters touch it: ``awaited`` exists since 0012."""
    return Table(
        "kickside_job",
        MetaData(schema=schema),
        Column("id", Uuid(), primary_key=True),
        Column("state", String(16), nullable=False),
        Column(
            "awaited", Boolean(), nullable=False, server_default=false(), info={"since": "0012"}
        ),
    )


def add_awaited_column(metadata: MetaData, schema: str | None) -> None:
    """Put ``awaited`` on ``metadata``'s copy of the job table (never the store's own): the
    schema as the migrations make it, for autogenerate and the tests to compare with."""
    job = metadata.tables[f"{schema}.kickside_job" if schema else "kickside_job"]
    job.append_column(awaited_table(schema).c.awaited._copy())


def hears_final(db: Database) -> bool:
    """Whether waiters on ``db`` are notified (PostgreSQL at 0012 or newer); checks the schema
    once per handle (an async caller checks it first, without blocking its loop)."""
    return db.is_postgresql and db.has_column(awaited_table(db.schema).c.awaited)


def mark_awaited(db: Database, conn: Connection, job_id: uuid.UUID) -> None:
    """Flag the job as waited for, unless it is final already (or gone): the waiter's next
    read finds it so. A settle racing with it either commits first (this UPDATE waits for its
    row lock, then skips the final row) or finds the flag set and notifies."""
    job = awaited_table(db.schema)
    conn.execute(
        update(job)
        .where(job.c.id == job_id, job.c.awaited.is_(False), job.c.state.not_in(_FINAL))
        .values(awaited=True)
    )


class Waiters:
    """Who waits for which job: callbacks by job id, called from the listener."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._callbacks: dict[uuid.UUID, list[Callable[[], None]]] = {}
        self.idle_since = time.monotonic()

    def add(self, job_id: uuid.UUID, callback: Callable[[], None]) -> None:
        with self._lock:
            self._callbacks.setdefault(job_id, []).append(callback)

    def remove(self, job_id: uuid.UUID, callback: Callable[[], None]) -> bool:
        """Forget ``callback``; whether no waiter is left."""
        with self._lock:
            callbacks = self._callbacks.get(job_id, [])
            with contextlib.suppress(ValueError):
                callbacks.remove(callback)
            if not callbacks:
                self._callbacks.pop(job_id, None)
            if not self._callbacks:
                self.idle_since = time.monotonic()
            return not self._callbacks

    @property
    def empty(self) -> bool:
        return not self._callbacks

    def call(self, payload: str | None) -> None:
        """Call the callbacks of the job named by ``payload``, or every callback (None)."""
        with self._lock:
            if payload is None:
                callbacks = [cb for cbs in self._callbacks.values() for cb in cbs]
            else:
                job_id = parse_uuid(payload)
                callbacks = list(self._callbacks.get(job_id, ())) if job_id else []
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a waiter's bug must not end the watch
                log.exception("wait callback failed for %s", payload or "every job")


def _bound(within: float | None) -> float:
    return CONNECT_SECONDS if within is None else max(0.0, min(within, CONNECT_SECONDS))


def _listen_sql(db: Database) -> str:
    return f'LISTEN "{final_channel(db)}"'


class FinalWatch:
    """The listener of one :class:`Database` in this process: a thread (see the module)."""

    def __init__(self, db: Database) -> None:
        self._db = weakref.ref(db)
        self.waiters = Waiters()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Set to end the running thread at once (:meth:`close`): each thread has its own.
        self._closing = threading.Event()
        #: Closed while waiters waited: the thread ends with the last of them, not later.
        self._end_when_idle = False
        self._connected = threading.Event()
        db.on_dispose(self.close)

    @contextlib.contextmanager
    def watching(
        self, job_id: uuid.UUID, callback: Callable[[], None], within: float | None = None
    ) -> Iterator[bool]:
        """Call ``callback`` (on the listener's thread) whenever ``job_id`` may have become
        final, until the block ends. Yields whether the listener connected within
        :data:`CONNECT_SECONDS` (or ``within`` seconds, if sooner): if not, nothing may be
        heard, and the waiter reads the job at its own pace."""
        self.waiters.add(job_id, callback)
        with self._lock:
            if self._thread is None:
                self._connected.clear()
                self._closing = threading.Event()
                self._thread = threading.Thread(
                    target=self._run,
                    args=(self._closing,),
                    name="kickside-wait-listen",
                    daemon=True,
                )
                self._thread.start()
        try:
            yield self._connected.wait(_bound(within))
        finally:
            self.waiters.remove(job_id, callback)

    def close(self, timeout: float = 2.0) -> None:
        """End the listening thread and close its connection (what :meth:`Database.dispose`
        does): at once when no one waits, instead of :data:`IDLE_SECONDS` later; else as soon
        as the last waiter is done, as a pooled connection in use outlives the pool's
        ``dispose``. A later wait listens again."""
        with self._lock:
            if not self.waiters.empty:
                self._end_when_idle = True
                return
            thread, self._thread = self._thread, None
            self._closing.set()
            self._connected.clear()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _done(self, closing: threading.Event) -> bool:
        """Whether the thread ends: closed, or no waiter for :data:`IDLE_SECONDS` (decided
        under the lock, so a waiter registering now starts a new thread)."""
        with self._lock:
            if closing.is_set():
                return True  # close() let go of this thread: a new one may be running
            idle = self._end_when_idle or time.monotonic() - self.waiters.idle_since >= IDLE_SECONDS
            if not (self.waiters.empty and idle) and self._db() is not None:
                return False
            self._end_when_idle = False
            self._thread = None
            self._connected.clear()
            return True

    def _connect(self) -> Any:
        db = self._db()
        if db is None:
            raise RuntimeError("the database handle is gone")
        raw = db.engine.raw_connection()
        conn = raw.driver_connection
        raw.detach()  # a dedicated connection, never returned to the pool
        assert conn is not None
        conn.autocommit = True
        conn.execute(_listen_sql(db))
        return conn

    def _run(self, closing: threading.Event) -> None:
        outage = Outage(log)
        while True:
            conn = None
            try:
                conn = self._connect()
                if closing.is_set():
                    return
                outage.succeeded()
                self._connected.set()
                self.waiters.call(None)  # whatever finished while no one listened
                while not self._done(closing):
                    for notification in conn.notifies(timeout=_POLL_S):
                        self.waiters.call(notification.payload)
                return
            except Exception as exc:
                if not closing.is_set():
                    self._connected.clear()
                if self._done(closing):
                    return
                closing.wait(outage.failed(exc))
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()


class AsyncFinalWatch:
    """The listener of one :class:`AsyncDatabase` on one event loop: a task that runs while
    waiters wait (see the module)."""

    def __init__(self, adb: AsyncDatabase) -> None:
        self._adb = weakref.ref(adb)
        self.waiters = Waiters()
        self._task: asyncio.Task[None] | None = None
        self._connected = asyncio.Event()

    @contextlib.asynccontextmanager
    async def watching(
        self, job_id: uuid.UUID, callback: Callable[[], None], within: float | None = None
    ) -> AsyncIterator[bool]:
        """As :meth:`FinalWatch.watching`; ``callback`` runs on the event loop."""
        self.waiters.add(job_id, callback)
        if self._task is None:
            self._connected.clear()
            self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            try:
                await asyncio.wait_for(self._connected.wait(), _bound(within))
                connected = True
            except TimeoutError:
                connected = False
            yield connected
        finally:
            if self.waiters.remove(job_id, callback) and self._task is not None:
                task, self._task = self._task, None
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _run(self) -> None:
        outage = Outage(log)
        while True:
            conn = None
            try:
                adb = self._adb()
                if adb is None:
                    return
                raw = await adb.engine.raw_connection()
                conn = raw.driver_connection
                raw.detach()  # a dedicated connection, closed here, never returned to the pool
                assert conn is not None
                await conn.set_autocommit(True)
                await conn.execute(_listen_sql(adb.db))
                del adb
                outage.succeeded()
                self._connected.set()
                self.waiters.call(None)  # whatever finished while no one listened
                async for notification in conn.notifies():
                    self.waiters.call(notification.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._connected.clear()
                await asyncio.sleep(outage.failed(exc))
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await conn.close()


_watches: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_watches_lock = threading.Lock()
if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's threads
    os.register_at_fork(after_in_child=_watches.clear)


def final_watch(db: Database) -> FinalWatch:
    """This process's :class:`FinalWatch` of ``db``."""
    with _watches_lock:
        watch = _watches.get(db)
        if watch is None:
            watch = _watches[db] = FinalWatch(db)
        return watch


def async_final_watch(adb: AsyncDatabase) -> AsyncFinalWatch:
    """The :class:`AsyncFinalWatch` of ``adb`` on the running event loop."""
    loop = asyncio.get_running_loop()
    with _watches_lock:
        by_loop = _watches.get(adb)
        if by_loop is None:
            by_loop = _watches[adb] = weakref.WeakKeyDictionary()
        watch = by_loop.get(loop)
        if watch is None:
            watch = by_loop[loop] = AsyncFinalWatch(adb)
        return watch
