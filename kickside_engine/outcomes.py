"""What a worker's ``perform`` can return or raise.

Return ``None`` or :class:`Done` when the work is done, or any other JSON value, its *result*
(stored on the job, see :func:`storable_result`); :class:`Snooze` for "not yet" (back to
scheduled without consuming an attempt); :class:`Cancel` when the work no longer matters;
:class:`Discard` when retrying cannot help. Raise any exception to fail the attempt: it is
retried with backoff, and discarded once ``max_attempts`` is used up. An exception may carry a
retry hint (``retry_after_ms``), a floor for the next delay.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kickside_engine.errors import InvalidArgumentError

MAX_RESULT_BYTES = 1024 * 1024
"""The largest result a job may store: 1 MiB of JSON text (UTF-8). A larger one fails the
attempt with its size; it is never truncated."""


@dataclass(frozen=True)
class Done:
    """The work is done.

    For a slot job: ``demand_satisfied=True`` says this run covered all work up to now, so
    ordinary demand received during the run is consumed (control wakes still rearm the slot);
    ``park=True`` parks the slot whatever demand arrived, unless a control wake is pending.
    ``result`` is stored on the job, as a plain returned value is (see
    :func:`storable_result`).
    """

    demand_satisfied: bool = False
    park: bool = False
    result: Any = None


@dataclass(frozen=True)
class Snooze:
    """Not yet: run again after ``delay``; the attempt is not consumed."""

    delay: timedelta


@dataclass(frozen=True)
class Cancel:
    """The work no longer matters (the record it was about is gone)."""

    reason: str


@dataclass(frozen=True)
class Discard:
    """The job failed permanently; retrying cannot help (bad input)."""

    reason: str


Outcome = Done | Snooze | Cancel | Discard


class RetryAfter(Exception):
    """Fail this attempt and retry no sooner than ``after`` (a provider's Retry-After)."""

    def __init__(self, message: str, *, after: timedelta) -> None:
        super().__init__(message)
        self.retry_after_ms = after / timedelta(milliseconds=1)


def retry_hint_ms(exc: BaseException) -> float | None:
    """The retry floor an exception carries in ``retry_after_ms``, or None.

    Hints come from providers (HTTP Retry-After and the like): a malformed one (not a finite,
    non-negative number) is ignored so that it can never keep a failure from being recorded.
    """
    value = getattr(exc, "retry_after_ms", None)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


class ResultNotStorableError(InvalidArgumentError):
    """A worker's result cannot be stored: not JSON, or over :data:`MAX_RESULT_BYTES`."""


def storable_result(value: Any) -> Any:
    """``value`` as it will be stored: its JSON form (a tuple comes back a list).

    Raises :class:`ResultNotStorableError`, naming the type or the size, for a value JSON
    cannot hold (a set, an object, a cycle, NaN, a NUL character) or one whose JSON text is
    over :data:`MAX_RESULT_BYTES`: the attempt then fails, so nothing is silently cut.
    """
    from kickside_engine.text import require_storable_json

    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        require_storable_json(encoded, "results")
    except (TypeError, ValueError, RecursionError, InvalidArgumentError) as exc:
        raise ResultNotStorableError(
            f"result of type {type(value).__name__} cannot be stored as JSON: {exc}"
        ) from None
    size = len(encoded.encode("utf-8", "surrogatepass"))
    if size > MAX_RESULT_BYTES:
        raise ResultNotStorableError(
            f"result of type {type(value).__name__} is {size} bytes of JSON, over the "
            f"{MAX_RESULT_BYTES} byte limit (MAX_RESULT_BYTES); store large data elsewhere "
            "and return a reference to it"
        )
    return json.loads(encoded)
