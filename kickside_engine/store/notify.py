"""Waking worker pools: in-process at once, across processes through NOTIFY or datagrams.

Each database (URL and schema) has one in-process :class:`WakeSignal`; an insert or a nudge in
this process wakes every pool of this process at once. On PostgreSQL, ``pg_notify`` inside the
inserting transaction wakes pools everywhere when (and only if) it commits. On a SQLite file the
signal also sends a Unix datagram, after the commit, to the pools of other processes on that
file (:mod:`~kickside_engine.store.wake_sockets`). Polling with jitter stays the fallback, so a
lost wake-up only costs latency.

The payloads that are not wakes (``cancel:<job id>``, ``audit:<action>``) take the same way on
SQLite: :func:`notify_in_transaction` keeps them on the connection, and they are published
(this process's subscribers, then the datagrams) once its transaction has committed; a
rollback drops them, as PostgreSQL drops a NOTIFY.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, event, text

from kickside_engine.store.database import Database
from kickside_engine.store.sqlite_file import sqlite_path
from kickside_engine.store.wake_sockets import WakeSender, wake_folder


def channel_name(db: Database) -> str:
    """The LISTEN/NOTIFY channel of a database's Kickside schema."""
    return f"kickside_{db.schema or 'public'}"


@dataclass
class WakeSignal:
    """A generation counter with a condition: waiters see every wake after the one they saw."""

    _cond: threading.Condition = field(default_factory=threading.Condition)
    generation: int = 0
    _subscribers: list[Callable[[str | None], None]] = field(default_factory=list)
    #: Reaches the pools of other processes (SQLite files; PostgreSQL has NOTIFY instead).
    remote: WakeSender | None = None

    def wake(self, queue: str | None = None) -> None:
        """Wake this process's waiters and subscribers, then other processes' pools (SQLite).

        Call it after the commit that made the work visible, never before."""
        with self._cond:
            self.generation += 1
            subscribers = list(self._subscribers)
            self._cond.notify_all()
        for callback in subscribers:
            callback(queue)
        if self.remote is not None:
            self.remote.send(queue or "nudge")

    def publish(self, payload: str) -> None:
        """Hand ``payload`` (``cancel:...``, ``audit:...``, not work to claim) to this
        process's subscribers, then to other processes' sockets (SQLite). After the commit."""
        with self._cond:
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback(payload)
        if self.remote is not None:
            self.remote.send(payload)

    def subscribe(self, callback: Callable[[str | None], None]) -> None:
        """Call ``callback(queue)`` on every wake (from the waking thread; keep it cheap)."""
        with self._cond:
            self._subscribers.append(callback)

    def unsubscribe(self, callback: Callable[[str | None], None]) -> None:
        with self._cond:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

    def wait(self, seen: int, timeout_seconds: float) -> int:
        """Wait until the generation passes ``seen`` or ``timeout_seconds`` elapse; the
        generation."""
        with self._cond:
            if self.generation == seen:
                self._cond.wait(timeout_seconds)
            return self.generation


_signals: dict[tuple[str, str | None], WakeSignal] = {}
_signals_lock = threading.Lock()


def local_signal(db: Database) -> WakeSignal:
    """This process's wake signal for ``db``."""
    key = (db.display_url(), db.schema)
    with _signals_lock:
        signal = _signals.get(key)
        if signal is None:
            folder = wake_folder_of(db)
            remote = WakeSender(folder) if folder is not None else None
            signal = _signals[key] = WakeSignal(remote=remote)
        return signal


def wake_folder_of(db: Database) -> Path | None:
    """Where pools on ``db``'s SQLite file bind their wake sockets (None on PostgreSQL)."""
    if not db.is_sqlite:
        return None
    path = sqlite_path(db.engine.url)
    return wake_folder(path) if path is not None else None


#: The payloads that SQLite publishes after the commit (wakes go through :meth:`WakeSignal.wake`,
#: which their callers call after committing).
AFTER_COMMIT_PREFIXES = ("cancel:", "audit:")
#: Keys of the connection's ``info``: payloads of the open transaction, and those committed but
#: not yet published (the commit event comes before the commit itself).
_PENDING = "kickside_notify_pending"
_COMMITTED = "kickside_notify_committed"
_watched_lock = threading.Lock()


def notify_in_transaction(db: Database, conn: Connection, payload: str) -> None:
    """Deliver ``payload`` when (and only if) ``conn``'s transaction commits: a NOTIFY on
    PostgreSQL; on SQLite, for ``cancel:`` and ``audit:`` payloads, the local signal's
    :meth:`~WakeSignal.publish` right after the commit (queue wakes are the caller's
    :meth:`~WakeSignal.wake`)."""
    if db.is_postgresql:
        conn.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel_name(db), "p": payload})
    elif payload.startswith(AFTER_COMMIT_PREFIXES):
        info = conn.info
        pending = info.get(_PENDING)
        if pending is None:
            _watch(db.engine)
            pending = info[_PENDING] = []
        pending.append((local_signal(db), payload))


def _watch(engine: Engine) -> None:
    """Follow ``engine``'s transactions: payloads are marked committed at the commit, dropped
    at a rollback, and published at the connection's next transaction or return to its pool
    (both after the commit has returned)."""
    with _watched_lock:
        if event.contains(engine, "commit", _on_commit):
            return
        event.listen(engine, "commit", _on_commit)
        event.listen(engine, "rollback", _on_rollback)
        event.listen(engine, "begin", _on_begin)
        event.listen(engine, "checkin", _on_checkin)


def _on_commit(conn: Connection) -> None:
    info = conn.info
    pending = info.pop(_PENDING, None)
    if pending:
        info.setdefault(_COMMITTED, []).extend(pending)


def _on_rollback(conn: Connection) -> None:
    info = conn.info
    info.pop(_PENDING, None)
    info.pop(_COMMITTED, None)  # a commit that failed is rolled back


def _on_begin(conn: Connection) -> None:
    _publish(conn.info)


def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
    if record is not None:
        _publish(record.info)


def _publish(info: dict[Any, Any]) -> None:
    committed = info.pop(_COMMITTED, None)
    for signal, payload in committed or ():
        signal.publish(payload)
