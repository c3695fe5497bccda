"""Wake-ups: how the rest of the process reaches the pool's supervisor loop.

The loop sleeps on its executors' pipes and on a self-pipe, the read end of :class:`Wakeups`.
Whatever should wake it writes a byte there, with an event saying why: a job inserted in this
process (the local signal), another process's change (a LISTEN payload on PostgreSQL, a wake
socket's datagram on a SQLite file, which the loop reads itself), a signal handler (``"stop"``,
``"reload"``), or a turn finished on the store thread (no event).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any


class Wakeups:
    """A self-pipe and the events posted with it, for the supervisor loop to act on.

    Events are ``"stop"``, ``"reload"``, ``"nudge"`` or a queue name (something to claim),
    ``"cancel:..."`` and ``"audit:..."`` (LISTEN payloads, and SQLite datagrams, which the loop
    appends itself). Posting is safe from any thread and from signal handlers: it appends to a
    deque and writes one byte without blocking (a full pipe wakes the loop all the same).
    """

    def __init__(self) -> None:
        self.events: deque[str] = deque()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)

    def fileno(self) -> int:
        """The read end, for the loop's selector: readable once something was posted."""
        return self._read

    def poke(self, event: str | None = None) -> None:
        """Wake the loop, with ``event`` for it to act on (none: just look around)."""
        if event:
            self.events.append(event)
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._write, b"x")

    def on_local_wake(self, queue: str | None) -> None:
        """The local signal's callback: a job was inserted in this process (into ``queue``)."""
        self.poke(queue or "nudge")

    def on_payload(self, payload: str) -> None:
        """The LISTEN callback: another process changed something on PostgreSQL."""
        self.poke(payload)

    def take(self, readable: bool = True) -> Iterator[str]:
        """Read the pipe if the loop's selector found it ``readable`` (one read: bytes beyond
        it keep the pipe readable for the next select), then yield the events posted, oldest
        first, until none is left (including those posted while the caller acts on earlier
        ones). Events do not wait for the pipe: a poke appends its event before its byte."""
        if readable:
            with contextlib.suppress(BlockingIOError, OSError):
                os.read(self._read, 4096)
        while self.events:
            yield self.events.popleft()

    def close(self) -> None:
        """Close both ends; later pokes do nothing."""
        os.close(self._read)
        os.close(self._write)


def route_signals(*, stop: Callable[[], None], upgrade: Callable[[], None]) -> dict[int, Any]:
    """In the main thread, have SIGTERM and SIGINT call ``stop`` and SIGHUP ``upgrade``;
    returns the handlers replaced (none on another thread), for :func:`restore_signals`."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    handlers = {signal.SIGTERM: stop, signal.SIGINT: stop, signal.SIGHUP: upgrade}
    for signum, handler in handlers.items():
        previous[signum] = signal.signal(signum, lambda *_a, h=handler: h())
    return previous


def restore_signals(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`route_signals` replaced."""
    for number, old in previous.items():
        signal.signal(number, old)
