"""Waking worker pools: in-process at once, across processes through NOTIFY or datagrams.

Each database (URL and schema) has one in-process :class:`WakeSignal`; an insert or a nudge in
this process wakes every pool of this process at once. On PostgreSQL, ``pg_notify`` inside the
inserting transaction wakes pools everywhere when (and only if) it commits. On a SQLite file the
signal also sends a Unix datagram, after the commit, to the pools of other processes on that
file (:mod:`~kickside_engine.store.wake_sockets`). Polling with jitter stays the fallback, so a
lost wake-up only costs latency.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import Connection, text

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


def notify_in_transaction(db: Database, conn: Connection, payload: str) -> None:
    """On PostgreSQL, queue a NOTIFY that is delivered when ``conn``'s transaction commits."""
    if db.is_postgresql:
        conn.execute(text("SELECT pg_notify(:c, :p)"), {"c": channel_name(db), "p": payload})
