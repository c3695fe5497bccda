"""Job identifiers: time-ordered UUIDs (version 7), so new rows land at the end of the index."""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_counter = 0
#: Random bytes drawn from the OS a few kilobytes at a time: one ``getrandom`` call per id was
#: a fifth of the client's time in a bulk enqueue.
_RANDOM_CHUNK = 4096
_random = b""
_random_at = 0


def _forget_random() -> None:
    """A forked child must not reuse its parent's unread random bytes (same ids)."""
    global _random, _random_at
    _random, _random_at = b"", 0


if hasattr(os, "register_at_fork"):  # platforms without fork (Windows) have nothing to forget
    os.register_at_fork(after_in_child=_forget_random)


def _random_bits(nbytes: int) -> int:
    """``nbytes`` fresh random bytes as an integer (call with ``_lock`` held)."""
    global _random, _random_at
    if _random_at + nbytes > len(_random):
        _random, _random_at = os.urandom(_RANDOM_CHUNK), 0
    start, _random_at = _random_at, _random_at + nbytes
    return int.from_bytes(_random[start:_random_at], "big")


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
            _counter = _random_bits(2) & 0x3FF
        _last_ms = ms
        counter = _counter
        rand = _random_bits(8) & ((1 << 62) - 1)
    return uuid_from_int((ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand)


_new = object.__new__
_set_int = uuid.UUID.__dict__["int"].__set__
_set_is_safe = uuid.UUID.__dict__["is_safe"].__set__
_UNKNOWN = uuid.SafeUUID.unknown


def uuid_from_int(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` for a value known to fit 128 bits, without its checks (which
    cost as much as making the rest of an id). It sets the slots ``UUID.__init__`` sets."""
    made: uuid.UUID = _new(uuid.UUID)
    _set_int(made, value)
    _set_is_safe(made, _UNKNOWN)
    return made


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


def parse_job_id(job_id: uuid.UUID | str, field: str = "job id") -> uuid.UUID:
    """A job id as a UUID; a malformed one is an :class:`InvalidArgumentError` naming
    ``field``. The one parser of job ids that every public entry point uses."""
    return require_uuid(job_id, field)
