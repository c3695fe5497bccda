"""One pooled connection kept checked out for single autocommitted statements (SQLite).

A single enqueue on SQLite is one statement that commits by itself
(:meth:`~kickside_engine.store.database.Database.execute_autocommit`). Checking a connection out
of SQLAlchemy's pool and returning it cost about 10 µs of the 60-150 µs such an enqueue takes,
so a handle on a SQLite file keeps one connection of the engine's pool checked out for these
statements. One thread uses it at a time; a thread that finds it busy takes a pooled
connection as before, so threads never wait on each other here. It is closed (not returned
to the pool) when the handle or its engine is disposed, and at interpreter exit. A connection
that was invalidated (its state unknown after an error) is replaced at the next use, and a
forked child never touches its parent's: it checks out its own.
"""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from typing import Any

from sqlalchemy import Engine, event


class KeptConnection:
    """A pooled connection of ``engine`` kept checked out; :meth:`take` it, use
    :meth:`connection`, then :meth:`give_back`."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._raw: Any = None
        self._pid = os.getpid()
        event.listen(engine, "engine_disposed", self._on_engine_disposed)
        _open.add(self)

    def take(self) -> bool:
        """Whether this thread may use the kept connection now (False: another thread is)."""
        return self._lock.acquire(blocking=False)

    def connection(self) -> Any:
        """The kept connection (a ``PoolProxiedConnection``), checked out when there is none
        yet, the last one was invalidated, or this process is a fork of the one that checked it
        out. Call it between :meth:`take` and :meth:`give_back`."""
        raw = self._raw
        pid = os.getpid()
        if raw is not None and self._pid == pid:
            if raw.is_valid:
                return raw
            raw.close()  # invalidated: the pool discards it
        self._raw = None
        raw = self._engine.raw_connection()
        self._raw, self._pid = raw, pid
        return raw

    def give_back(self) -> None:
        """Let the next call use the connection again."""
        self._lock.release()

    def close(self, *, wait: bool = True) -> None:
        """Close the connection (the next use opens one again); ``wait=False``: not if another
        thread is using it right now."""
        if not self._lock.acquire(blocking=wait):
            return
        try:
            raw, self._raw = self._raw, None
            if raw is not None and self._pid == os.getpid():
                # Closed for good: the pool it came from may have been disposed of already.
                raw.invalidate()
                raw.close()
        finally:
            self._lock.release()

    def _on_engine_disposed(self, _engine: Engine) -> None:
        self.close()


_open: weakref.WeakSet[KeptConnection] = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    # A connection left to the garbage collector at exit is a ResourceWarning (Python 3.13).
    for kept in list(_open):
        kept.close(wait=False)
