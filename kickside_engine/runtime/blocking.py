"""Finding the async job that blocks its executor's event loop.

An ``async def`` job that calls blocking code (``time.sleep``, a synchronous HTTP client, a long
computation) stops every other job on its executor's loop until it returns. asyncio's debug mode
reports such callbacks, but costs too much to run in production. Instead each job's coroutine is
wrapped in :class:`TimedSteps`, which times every step of it (from one resumption to its next
``await`` that suspends) and calls ``on_blocked(seconds)`` for a step longer than the threshold.
A step is exactly the time the loop ran that job's code and nothing else, so the report names
the job that blocked the loop and for how long. The cost is two clock reads per step.

A job whose step never ends (a loop blocked for good) is not reported here: the supervisor kills
the executor once a cancel does not come back, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

#: A step of a job at least this long is reported (asyncio's debug mode uses 0.1 s for any
#: callback; a job's step is allowed a little more before it is called blocking).
BLOCKED_LOOP_REPORT_SECONDS = 0.25

T = TypeVar("T")


class TimedSteps(Coroutine[Any, Any, T]):
    """``coro``, calling ``on_blocked(seconds)`` after any of its steps that took at least
    ``threshold`` seconds. A coroutine itself (``asyncio`` runs it as a task)."""

    __slots__ = ("_coro", "_on_blocked", "_threshold")

    def __init__(
        self,
        coro: Coroutine[Any, Any, T],
        on_blocked: Callable[[float], None],
        threshold: float = BLOCKED_LOOP_REPORT_SECONDS,
    ) -> None:
        self._coro = coro
        self._on_blocked = on_blocked
        self._threshold = threshold

    def send(self, value: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._coro.send(value)
        finally:
            self._timed(started)

    def throw(self, *exc: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._coro.throw(*exc)
        finally:
            self._timed(started)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, T]:
        return self._coro.__await__()

    def _timed(self, started: float) -> None:
        took = time.perf_counter() - started
        if took >= self._threshold:
            self._on_blocked(took)
