"""Following a Kickside database's changes as they commit: :func:`listen`.

Kickside notifies its schema's channel (:func:`~kickside_engine.store.notify.channel_name`) in the
transaction that makes a change, so the notification is delivered when, and only if, it
commits. The payloads:

- a queue name: a job became available there (enqueue, retry, resume, the Stager and the
  Lifeline);
- ``wake:<identity>``, ``nudge``, ``cancel:<job id>``, ``reload``: wakes and controls meant for
  worker pools;
- ``audit:<action>``: an operator action was recorded (pause, cancel, discard, park, purge,
  bulk actions, capacity settings: everything :func:`~kickside_engine.audit.record_audit`
  records), one per transaction.

Jobs finishing are not notified: that would cost a notification per job on the hot path, and
a dashboard's interval refresh shows completions anyway. On SQLite :func:`listen` follows this
process's own wake-ups (its :class:`~kickside_engine.store.notify.WakeSignal`) and, on a file,
other processes' through a wake socket of its own in the file's wake folder
(:mod:`~kickside_engine.store.wake_sockets`), closed when the subscription stops: the same
payloads (a queue name or ``nudge`` for an enqueue or a wake, ``cancel:``, ``audit:``,
``reload``), sent after the commit. An in-memory database has no other process to hear.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
from collections.abc import Callable
from typing import Any

from kickside_engine.store.database import Database
from kickside_engine.store.notify import channel_name, local_signal, wake_folder_of
from kickside_engine.store.reconnect import Outage
from kickside_engine.store.wake_sockets import WakeSocket

log = logging.getLogger("kickside.listen")

_POLL_S = 0.25


class Subscription:
    """A running :func:`listen`; :meth:`stop` ends it (the callback is not called after)."""

    def __init__(self, db: Database, callback: Callable[[str], None]) -> None:
        self.db = db
        self._callback = callback
        self._stop = threading.Event()
        #: Set while a LISTEN connection is up (on SQLite: at once, nothing to connect).
        self.connected = threading.Event()
        self._thread: threading.Thread | None = None
        #: On a SQLite file: the socket other processes' payloads arrive on (None when it
        #: could not be bound: this process's own are still heard).
        self.wake_socket: WakeSocket | None = None
        if db.is_postgresql:
            self._thread = threading.Thread(target=self._run, name="kickside-listen", daemon=True)
            self._thread.start()
        else:
            local_signal(db).subscribe(self._on_local)
            folder = wake_folder_of(db)
            if folder is not None:
                self.wake_socket = WakeSocket.open(folder, "listen")
            if self.wake_socket is not None:
                self._thread = threading.Thread(
                    target=self._receive, args=(self.wake_socket,), name="kickside-listen",
                    daemon=True,
                )  # fmt: skip
                self._thread.start()
            self.connected.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    @property
    def hears_other_processes(self) -> bool:
        """Whether other processes' changes are delivered (PostgreSQL; a SQLite file whose
        wake socket is bound), not only this process's own."""
        return self.db.is_postgresql or self.wake_socket is not None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop listening and close the connection (waits up to ``timeout`` seconds)."""
        self._stop.set()
        if not self.db.is_postgresql:
            local_signal(self.db).unsubscribe(self._on_local)
        if (
            self._thread is not None
            and self._thread.is_alive()
            and self._thread is not threading.current_thread()
        ):
            self._thread.join(timeout)
        if self.wake_socket is not None and (self._thread is None or not self._thread.is_alive()):
            self.wake_socket.close()  # else the thread closes it as it ends
        self.connected.clear()

    def _deliver(self, payload: str) -> None:
        if self._stop.is_set():
            return
        try:
            self._callback(payload)
        except Exception:  # a subscriber's bug must not end the subscription
            log.exception("listen callback failed on %r", payload)

    def _on_local(self, queue: str | None) -> None:
        self._deliver(queue or "nudge")

    def _receive(self, wake_socket: WakeSocket) -> None:
        """On a SQLite file: deliver what other processes send to the subscription's socket."""
        try:
            while not self._stop.is_set():
                readable, _, _ = select.select([wake_socket], [], [], _POLL_S)
                if readable:
                    for payload in wake_socket.receive():
                        self._deliver(payload)
        except Exception:  # the socket closed under us (interpreter exit): nothing to hear
            log.debug("wake socket closed", exc_info=True)
        finally:
            wake_socket.close()

    def _connect(self) -> Any:
        raw = self.db.engine.raw_connection()
        conn = raw.driver_connection
        raw.detach()  # a dedicated connection, never returned to the pool
        assert conn is not None
        conn.autocommit = True
        conn.execute(f'LISTEN "{channel_name(self.db)}"')
        return conn

    def _run(self) -> None:
        outage = Outage(log)
        while not self._stop.is_set():
            conn = None
            try:
                conn = self._connect()
                self.connected.set()
                outage.succeeded()
                while not self._stop.is_set():
                    for notification in conn.notifies(timeout=_POLL_S):
                        self._deliver(notification.payload)
            except Exception as exc:
                self.connected.clear()
                if self._stop.is_set():
                    break
                self._stop.wait(outage.failed(exc))
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()


def listen(db: Database, callback: Callable[[str], None]) -> Subscription:
    """Call ``callback(payload)`` for every notification of ``db``'s schema until stopped.

    On PostgreSQL a daemon thread holds a connection of its own that LISTENs, reconnecting
    with backoff (0.1 s doubling to 5 s, jittered: :mod:`kickside_engine.store.reconnect`) whenever
    it is lost, and logging one line when it goes and one when it is back; notifications sent
    while it is down are lost, so treat one as "look again", never as the only way to learn of
    a change.
    The callback runs on that thread (keep it short; hand work to your own loop). On SQLite
    it runs on the thread that woke this process's pools, or (another process's payload) on
    the subscription's thread, which waits on its wake socket. See the module for the
    payloads.
    """
    return Subscription(db, callback)
