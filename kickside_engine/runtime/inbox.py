"""The supervisor's side of an executor's pipe: every message waiting, taken in one read.

``Connection.recv_bytes`` reads one message in two system calls (its length, then its bytes),
and the supervisor's loop went round once per message: with process executors sending a
result per job, that was a loop turn per job. An :class:`Inbox` reads what the pipe holds in
one call and splits it into messages, in the framing ``Connection.send_bytes`` writes (a
4-byte big-endian length, or -1 and an 8-byte length for messages over 2 GiB).
"""

from __future__ import annotations

import os
import pickle
import select
import struct
from multiprocessing.connection import Connection
from typing import Any

#: The most one read takes; a longer message is read in several.
READ_SIZE = 1 << 16
_LENGTH = struct.Struct("!i")
_LONG_LENGTH = struct.Struct("!Q")


class Inbox:
    """Messages from one executor's pipe, read in bulk (see the module docstring)."""

    def __init__(self, conn: Connection) -> None:
        self.fd = conn.fileno()
        self._buffer = bytearray()

    def read(self) -> list[Any]:
        """Read what the pipe holds (call it when it is readable: it blocks otherwise) and
        return the whole messages, in order; a message not yet whole waits for the next read.

        Raises ``EOFError`` when the executor's end is closed and no message is left.
        """
        data = os.read(self.fd, READ_SIZE)
        if not data:
            raise EOFError("the executor's end of the pipe is closed")
        self._buffer += data
        return self._messages()

    def waiting(self) -> bool:
        """Whether the pipe holds something to read now."""
        readable, _, _ = select.select([self.fd], [], [], 0)
        return bool(readable)

    def _messages(self) -> list[Any]:
        messages: list[Any] = []
        buffer = self._buffer
        start = 0
        while len(buffer) - start >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(buffer, start)
            header = _LENGTH.size
            if size == -1:
                if len(buffer) - start < header + _LONG_LENGTH.size:
                    break
                (size,) = _LONG_LENGTH.unpack_from(buffer, start + header)
                header += _LONG_LENGTH.size
            end = start + header + size
            if end > len(buffer):
                break
            messages.append(pickle.loads(buffer[start + header : end]))
            start = end
        del buffer[:start]
        return messages
