"""Cross-process wake-ups on SQLite: Unix datagrams through a folder beside the database file.

SQLite has no LISTEN/NOTIFY. Every pool on a SQLite file binds a Unix datagram socket in the
*wake folder* of that file (``/path/app.db`` → ``/path/app.db-kickside-wake/``); after a
commit that makes work due (an enqueue, ``nudge_workers``, an operator's wake, a resumed queue,
the Stager and the Lifeline) the committing process sends one datagram, the payload a queue
name or ``nudge``, to every socket in the folder but its own. The pool's loop waits on its
socket as it waits on its executors, so it wakes within a millisecond and costs nothing while
idle. Sending never blocks: a full receive queue (the pool has wakes pending already), a
socket whose pool died (its file is removed), a folder nobody can write: all cost at most the
pool's poll interval, never a job, because the job is committed before anything is sent and
polling stays the fallback. Why datagrams rather than ``PRAGMA data_version`` or inotify, with
the numbers measured: docs/operating/sqlite.md.

Besides wakes, the datagrams carry what PostgreSQL's NOTIFY carries: ``cancel:<job id>`` (an
operator took an executing job away: its pool checks its leases at once), ``audit:<action>``
and ``reload`` (``kickside reload``: upgrade in place). A socket's name says who bound it:
``<pid>-p<hex>.sock`` a pool that acts on ``reload``, ``<pid>-l<hex>.sock`` a
:func:`~kickside_engine.store.listen.listen` subscription, ``<pid>-<hex>.sock`` a pool of an
older Kickside (which only claims on any datagram, and is reloaded by SIGHUP). A datagram
never stops a pool, and whatever it says is checked against the database.

A path too long for a socket address (about 100 bytes) moves the folder into the temporary
directory under a hash of the database file's real path, which every process computes alike.

Sending sockets are closed when the :class:`~kickside_engine.store.database.Database` is
disposed (:func:`close_senders`) and at interpreter exit; bound sockets when their pool or
subscription stops, and at exit too.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import logging
import os
import secrets
import socket
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Literal

log = logging.getLogger("kickside.wake_sockets")

#: The wake folder's name is the database file's name with this suffix.
FOLDER_SUFFIX = "-kickside-wake"
#: ``sun_path`` holds 108 bytes on Linux and 104 on macOS (with a final NUL); a socket's name
#: (``/``, a PID of up to 7 digits, ``-``, 8 hex digits, ``.sock``) takes up to 22.
_MAX_FOLDER_BYTES = (103 if sys.platform == "darwin" else 107) - 22
#: A sender lists the folder again when its modification time changes, and at least this often
#: (a folder's time can be too coarse to show two pools binding within one tick).
RELIST_SECONDS = 1.0
#: A datagram carries at most this many bytes of payload (queue names are at most 255 chars).
MAX_PAYLOAD_BYTES = 1024
#: The first character of a socket name's token: who bound it (an older pool's is a hex digit).
POOL_MARK = "p"
LISTEN_MARK = "l"

Role = Literal["pool", "listen"]

#: Senders holding an open socket, and bound sockets: closed by :func:`close_senders` and at
#: exit (a socket left to the garbage collector at exit is a ResourceWarning, and a bound
#: one leaves its file behind).
_open_senders: weakref.WeakSet[WakeSender] = weakref.WeakSet()
_open_sockets: weakref.WeakSet[WakeSocket] = weakref.WeakSet()


def wake_folder(database_file: Path) -> Path:
    """The folder where the pools of ``database_file`` bind their wake sockets."""
    real = database_file.expanduser().resolve()
    folder = real.with_name(real.name + FOLDER_SUFFIX)
    if len(os.fsencode(folder)) <= _MAX_FOLDER_BYTES:
        return folder
    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"kickside-wake-{digest}"


class WakeSender:
    """Sends a wake datagram to every pool bound in a wake folder, never blocking.

    Safe from any thread; the list of sockets is cached and read again when the folder changes.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._listed_mtime_ns = -1
        self._listed_at = 0.0
        self._listed_pid = -1
        self._targets: tuple[str, ...] = ()

    def send(self, payload: str) -> int:
        """Send ``payload`` to every other process's socket on this database; how many took
        it."""
        return len(self.deliver(payload))

    def deliver(self, payload: str, *, fresh: bool = False) -> list[str]:
        """Send ``payload`` to every other process's socket on this database; the paths of
        those that took it. ``fresh``: list the folder now rather than trust the cached list
        (for a rare control message that reports whom it reached)."""
        try:
            mtime_ns = os.stat(self.folder).st_mtime_ns
        except OSError:
            return []  # no pool has ever listened on this file
        now = time.monotonic()
        pid = os.getpid()
        if (
            fresh
            or mtime_ns != self._listed_mtime_ns
            or now - self._listed_at > RELIST_SECONDS
            or pid != self._listed_pid
        ):
            self._list(mtime_ns, now, pid)
        if not self._targets:
            return []
        sock = self._sock or self._open()
        data = payload.encode()[:MAX_PAYLOAD_BYTES]
        sent: list[str] = []
        for target in self._targets:
            try:
                sock.sendto(data, target)
                sent.append(target)
            except ConnectionRefusedError:  # nobody bound: the pool died without cleaning up
                with contextlib.suppress(OSError):
                    os.unlink(target)
            except OSError:
                # A full queue (the pool has wakes pending), a socket gone since the listing,
                # no permission: the pool's poll covers it.
                continue
        return sent

    def _open(self) -> socket.socket:
        with self._lock:  # two threads' first sends open one socket
            if self._sock is None:  # unbound: after a fork the child sends through it as well
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sock.setblocking(False)
                self._sock = sock
                _open_senders.add(self)
            return self._sock

    def close(self) -> None:
        """Close the sending socket (a later :meth:`send` opens another; a send racing this
        close loses its datagram, which polling covers)."""
        with self._lock:
            sock, self._sock = self._sock, None
            _open_senders.discard(self)
        if sock is not None:
            sock.close()

    def _list(self, mtime_ns: int, now: float, pid: int) -> None:
        own = f"{pid}-"
        try:
            names = os.listdir(self.folder)
        except OSError:
            names = []
        self._targets = tuple(
            str(self.folder / name)
            for name in names
            if name.endswith(".sock") and not name.startswith(own)
        )
        self._listed_mtime_ns, self._listed_at, self._listed_pid = mtime_ns, now, pid


class WakeSocket:
    """A pool's bound wake socket: readable when another process sent a wake.

    :meth:`open` returns None (after one warning) when the socket cannot be bound; the pool
    then relies on polling alone.
    """

    def __init__(self, sock: socket.socket, path: Path) -> None:
        self._sock = sock
        self.path = path

    @classmethod
    def open(cls, folder: Path, role: Role = "pool") -> WakeSocket | None:
        """Bind a new socket in ``folder`` (created when missing), or None when that fails.

        ``role`` is written into the socket's name (see the module): senders of ``reload``
        tell a pool from a subscription, and this pool from one of an older Kickside."""
        mark = POOL_MARK if role == "pool" else LISTEN_MARK
        path = folder / f"{os.getpid()}-{mark}{secrets.token_hex(4)[1:]}.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            try:
                folder.mkdir(exist_ok=True)
                sock.bind(str(path))
            except FileNotFoundError:  # the last pool removed the folder meanwhile: make it again
                folder.mkdir(exist_ok=True)
                sock.bind(str(path))
        except OSError as exc:
            sock.close()
            if role == "pool":
                log.warning(
                    "cannot bind a wake socket in %s (%s): other processes' jobs are found by "
                    "polling only",
                    folder,
                    exc.strerror or exc,
                )
            else:  # a dashboard that may only read: its interval refresh covers the rest
                log.info(
                    "cannot bind a wake socket in %s (%s): other processes' changes are not "
                    "notified to this subscription",
                    folder,
                    exc.strerror or exc,
                )
            return None
        sock.setblocking(False)
        bound = cls(sock, path)
        _open_sockets.add(bound)
        return bound

    def fileno(self) -> int:
        """The socket, for a selector: readable once a wake arrived."""
        return self._sock.fileno()

    def receive(self) -> list[str]:
        """Every payload waiting (none when nothing is), without blocking."""
        payloads: list[str] = []
        while True:
            try:
                data = self._sock.recv(MAX_PAYLOAD_BYTES)
            except (BlockingIOError, InterruptedError):
                return payloads
            except OSError as exc:
                if exc.errno == errno.EBADF:  # closed meanwhile
                    return payloads
                raise
            payloads.append(data.decode(errors="replace") or "nudge")

    def close(self) -> None:
        """Stop receiving and remove the socket's file (senders stop sending to it), and the
        folder when no other pool is bound there."""
        _open_sockets.discard(self)
        if self._sock.fileno() == -1:
            return  # closed already
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):  # not empty: another pool still listens
            os.rmdir(self.path.parent)
        self._sock.close()


def reloading_pool_pid(target: str | Path) -> int | None:
    """The process ID in the name of a socket bound by a pool that acts on a ``reload``
    datagram (``<pid>-p<hex>.sock``); None for a subscription's or an older pool's socket."""
    pid, dash, rest = Path(target).name.partition("-")
    if not dash or not rest.startswith(POOL_MARK) or not pid.isdigit():
        return None
    return int(pid)


def is_subscription(target: str | Path) -> bool:
    """Whether a socket was bound by a :func:`~kickside_engine.store.listen.listen`
    subscription (``<pid>-l<hex>.sock``) rather than by a pool."""
    return Path(target).name.partition("-")[2].startswith(LISTEN_MARK)


def close_senders(folder: Path | None = None) -> None:
    """Close the sending sockets of ``folder`` (every folder's when None); a later send opens
    another. :meth:`Database.dispose <kickside_engine.store.database.Database.dispose>` calls
    it for its file, and the interpreter's exit for all."""
    for sender in list(_open_senders):
        if folder is None or sender.folder == folder:
            sender.close()


def _close_at_exit() -> None:
    close_senders()
    for bound in list(_open_sockets):
        with contextlib.suppress(OSError):
            bound.close()


atexit.register(_close_at_exit)
