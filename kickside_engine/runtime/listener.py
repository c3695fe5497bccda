"""PostgreSQL LISTEN on the schema's channel, feeding payloads to the supervisor.

Payloads: a queue name (a job became available there), ``nudge``, ``reload``,
``cancel:<job id>``, ``wake:<identity>``. A lost connection is re-established with backoff;
meanwhile the supervisor's polling keeps work moving.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from kickside_engine.notify import channel_name
from kickside_engine.store.database import Database

log = logging.getLogger("kickside.listener")


class Listener:
    """A daemon thread that LISTENs and calls ``on_payload`` for each notification."""

    def __init__(self, db: Database, on_payload: Callable[[str], None]) -> None:
        self.db = db
        self.on_payload = on_payload
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kickside-listener", daemon=True)
        self.connected = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _connect(self) -> Any:
        raw = self.db.engine.raw_connection()
        conn = raw.driver_connection
        raw.detach()  # a dedicated connection, never returned to the pool
        assert conn is not None
        conn.autocommit = True
        conn.execute(f'LISTEN "{channel_name(self.db)}"')
        return conn

    def _run(self) -> None:
        delay = 0.1
        while not self._stop.is_set():
            conn = None
            try:
                conn = self._connect()
                self.connected.set()
                delay = 0.1
                while not self._stop.is_set():
                    for notify in conn.notifies(timeout=0.5):
                        self.on_payload(notify.payload)
            except Exception as exc:
                self.connected.clear()
                if self._stop.is_set():
                    break
                log.warning("listener connection lost, retrying in %.1fs: %s", delay, exc)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
