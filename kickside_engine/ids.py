"""Job identifiers: time-ordered UUIDs (version 7), so new rows land at the end of the index."""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7() -> uuid.UUID:
    """A UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then random bits.

    Within one millisecond a 12-bit counter keeps ids from one process strictly increasing.
    """
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            _counter += 1
            if _counter > 0xFFF:
                ms += 1
                _counter = 0
        else:
            _counter = int.from_bytes(os.urandom(2), "big") & 0x3FF
        _last_ms = ms
        counter = _counter
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand
    return uuid.UUID(int=value)


def parse_uuid(value: str | uuid.UUID) -> uuid.UUID | None:
    """Parse a UUID, returning None for anything malformed."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        return None
    try:
        return uuid.UUID(value.strip())
    except ValueError:
        return None


def require_uuid(value: uuid.UUID | str, field: str = "job id") -> uuid.UUID:
    """Parse a UUID; a malformed one is an :class:`InvalidArgumentError` naming ``field``."""
    parsed = parse_uuid(value)
    if parsed is None:
        from kickside_engine.errors import InvalidArgumentError

        raise InvalidArgumentError(f"{field} {str(value)[:80]!r} is not a UUID")
    return parsed
