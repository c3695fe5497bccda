"""Catching a client's "retrying in N s" log records, and checking they follow the schedule of
:mod:`kickside_engine.store.reconnect` (0.1 s doubling to 5 s, up to a fifth early, waited out).

An :class:`~kickside_engine.store.reconnect.Outage` logs the first retry of an outage as a warning
and the others at DEBUG: :data:`RETRIES` matches both."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from kickside_engine.store.reconnect import backoff_seconds

#: The messages of an outage's retries: the first, then the rest.
RETRIES = ("database unavailable, retrying in", "database still unavailable, retrying in")


class RetryLog(logging.Handler):
    """Records of ``logger`` whose message starts with ``prefix`` (or one of them): (monotonic
    time, delay), the delay being the record's first argument."""

    def __init__(self, logger: str, prefix: str | tuple[str, ...] = RETRIES) -> None:
        super().__init__(logging.DEBUG)
        self.logger, self.prefix = logger, prefix
        self.retries: list[tuple[float, float]] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == self.logger and str(record.msg).startswith(self.prefix):
            with self._guard:
                self.retries.append((time.monotonic(), float(record.args[0])))  # type: ignore[index]

    def since(self, index: int) -> list[tuple[float, float]]:
        with self._guard:
            return self.retries[index:]


@contextmanager
def retry_log(logger: str, prefix: str | tuple[str, ...] = RETRIES) -> Iterator[RetryLog]:
    """A :class:`RetryLog` attached to ``logger`` for the block (which logs DEBUG meanwhile)."""
    handler = RetryLog(logger, prefix)
    target = logging.getLogger(logger)
    level = target.level
    target.setLevel(logging.DEBUG)
    target.addHandler(handler)
    try:
        yield handler
    finally:
        target.removeHandler(handler)
        target.setLevel(level)


def assert_backs_off(retries: list[tuple[float, float]]) -> None:
    """Each wait doubles from 0.1 s up to 5 s (less up to 20 % jitter), and really is waited."""
    for n, (_at, wait) in enumerate(retries, start=1):
        top = backoff_seconds(n, 0.1, 5.0)
        assert 0.8 * top - 0.05 <= wait <= top + 0.05, (n, retries)  # logged to 0.1 s
    for (at, wait), (next_at, _) in itertools.pairwise(retries):
        assert next_at - at >= wait - 0.06, f"retried {next_at - at:.3f}s after saying {wait}s"
