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

A path too long for a socket address (about 100 bytes) moves the folder into the temporary
directory under a hash of the database file's real path, which every process computes alike.
"""

from __future__ import annotations

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
from pathlib import Path

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
        """Send ``payload`` to every other process's pool on this database; how many took it."""
        try:
            mtime_ns = os.stat(self.folder).st_mtime_ns
        except OSError:
            return 0  # no pool has ever listened on this file
        now = time.monotonic()
        pid = os.getpid()
        if (
            mtime_ns != self._listed_mtime_ns
            or now - self._listed_at > RELIST_SECONDS
            or pid != self._listed_pid
        ):
            self._list(mtime_ns, now, pid)
        if not self._targets:
            return 0
        sock = self._sock or self._open()
        data = payload.encode()[:MAX_PAYLOAD_BYTES]
        sent = 0
        for target in self._targets:
            try:
                sock.sendto(data, target)
                sent += 1
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
            return self._sock

    def close(self) -> None:
        """Close the sending socket (a later :meth:`send` opens another)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

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
    def open(cls, folder: Path) -> WakeSocket | None:
        """Bind a new socket in ``folder`` (created when missing), or None when that fails."""
        path = folder / f"{os.getpid()}-{secrets.token_hex(4)}.sock"
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
            log.warning(
                "cannot bind a wake socket in %s (%s): other processes' jobs are found by "
                "polling only",
                folder,
                exc.strerror or exc,
            )
            return None
        sock.setblocking(False)
        return cls(sock, path)

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
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):  # not empty: another pool still listens
            os.rmdir(self.path.parent)
        self._sock.close()
