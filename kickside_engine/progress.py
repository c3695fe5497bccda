"""Progress a running job reports: checked, coalesced at the source, and handed to its pool.

A worker calls ``job.report_progress(value)`` (:meth:`kickside_engine.models.Job.report_progress`)
with a fraction between 0 and 1 or a small JSON object. The value is checked at once
(:func:`storable_progress`, :class:`ProgressNotStorableError`). While the job runs, its executor
holds a :class:`ProgressReporter` for it: a tight loop of reports costs a lock and an assignment
each, and at most one value per :data:`PROGRESS_INTERVAL_SECONDS` leaves the executor for the
pool, which writes what arrived once per tick in one transaction, fenced by the lease. The last
value reported and not yet sent travels with the attempt's outcome and is written in the same
statement that settles it, so the final value is never lost to the throttle.

Progress belongs to the live attempt: a claim clears it, so a retry never shows the previous
attempt's 90 %; it stays on the job after the attempt ends, for operators to read.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kickside_engine.errors import InvalidArgumentError

if TYPE_CHECKING:
    from kickside_engine.models import Job

#: The largest progress object a job may report: 4 KiB of JSON text (UTF-8). Progress is read
#: live by dashboards; anything bigger belongs in the result.
MAX_PROGRESS_BYTES = 4096
#: At most one value per job leaves an executor for its pool in this many seconds; the pool
#: writes what it received at most once per this interval too.
PROGRESS_INTERVAL_SECONDS = 1.0


class ProgressNotStorableError(InvalidArgumentError):
    """A progress value was refused: neither a fraction in [0, 1] nor a small JSON object."""


class NotRunningError(InvalidArgumentError):
    """``report_progress`` was called for a job that is not running here (a job read with
    ``get_job``, or one whose attempt already ended)."""


def storable_progress(value: Any) -> float | dict[str, Any]:
    """``value`` as it will be stored: a float in [0, 1], or a dict in its JSON form.

    Raises :class:`ProgressNotStorableError` naming what is wrong: a number outside [0, 1] or
    not finite, a bool, a type other than a number or a dict, a dict with non-string keys or
    values JSON cannot hold (the rules of results, see
    :func:`~kickside_engine.outcomes.storable_result`), or one over :data:`MAX_PROGRESS_BYTES`.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | Mapping):
        raise ProgressNotStorableError(
            f"progress must be a fraction between 0 and 1 or a dict, not {type(value).__name__}"
        )
    if isinstance(value, int | float):
        if not math.isfinite(value) or not 0 <= value <= 1:
            raise ProgressNotStorableError(
                f"progress fraction must be between 0 and 1, got {value!r}"
            )
        return float(value)
    if not all(isinstance(key, str) for key in value):
        raise ProgressNotStorableError("progress dict keys must be strings")
    from kickside_engine.text import require_storable_json

    try:
        encoded = json.dumps(dict(value), ensure_ascii=False, allow_nan=False)
        require_storable_json(encoded, "its values")
    except (TypeError, ValueError, RecursionError) as exc:
        raise ProgressNotStorableError(f"progress cannot be stored as JSON: {exc}") from None
    size = len(encoded.encode("utf-8", "surrogatepass"))
    if size > MAX_PROGRESS_BYTES:
        raise ProgressNotStorableError(
            f"progress is {size} bytes of JSON, over the {MAX_PROGRESS_BYTES} byte limit "
            "(MAX_PROGRESS_BYTES); report a summary and return the details as the result"
        )
    loaded: dict[str, Any] = json.loads(encoded)
    return loaded


class ProgressReporter:
    """One running attempt's progress: the latest value, and whether it left for the pool.

    ``send`` (None in the testing helpers) takes a value at most once per ``interval_seconds``.
    A value reported within the interval waits for it to pass (a timer sends it then, so a
    worker that reports and then computes for a minute is still seen where it is); a newer one
    replaces it meanwhile. :meth:`unsent` is the last value not sent, which goes with the
    outcome. Safe to call from threads the worker starts.
    """

    __slots__ = (
        "_dirty",
        "_ended",
        "_interval",
        "_latest",
        "_lock",
        "_send",
        "_sent_at",
        "_timer",
        "on_report",
    )

    def __init__(
        self,
        send: Callable[[Any], None] | None = None,
        *,
        interval_seconds: float = PROGRESS_INTERVAL_SECONDS,
        on_report: Callable[[Any], None] | None = None,
    ) -> None:
        self._send = send
        self._interval = interval_seconds
        #: Called with each accepted value (the testing helpers collect them so).
        self.on_report = on_report
        self._lock = threading.Lock()
        self._latest: Any = None
        self._dirty = False
        self._sent_at = -math.inf
        self._timer: threading.Timer | None = None
        self._ended = False

    def report(self, value: Any) -> None:
        """Check ``value`` and keep it; send it now unless a value left within the interval."""
        stored = storable_progress(value)
        with self._lock:
            self._latest, self._dirty = stored, True
            if self.on_report is not None:
                self.on_report(stored)
            if self._send is None or self._ended:
                return
            wait = self._sent_at + self._interval - time.monotonic()
            if wait <= 0:
                self._send_latest()
            elif self._timer is None:
                self._timer = threading.Timer(wait, self._flush)
                self._timer.daemon = True
                self._timer.start()

    def _flush(self) -> None:
        with self._lock:
            self._timer = None
            if self._dirty and not self._ended:
                self._send_latest()

    def _send_latest(self) -> None:
        assert self._send is not None
        self._sent_at, self._dirty = time.monotonic(), False
        self._send(self._latest)

    def unsent(self) -> Any:
        """End the reporting: the latest value not sent (None when there is none), for the
        attempt's outcome to carry."""
        with self._lock:
            self._ended = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._dirty:
                return None
            self._dirty = False
            return self._latest


class Attempt:
    """One attempt running in this process, as :func:`report` finds it. Its reporter is made
    by the first report: most jobs never report, and a run's bookkeeping stays a dict entry."""

    __slots__ = ("job", "on_report", "reporter", "send")

    def __init__(
        self,
        job: Job,
        send: Callable[[Any], None] | None,
        on_report: Callable[[Any], None] | None,
    ) -> None:
        self.job = job
        self.send = send
        self.on_report = on_report
        self.reporter: ProgressReporter | None = None


#: The attempts running in this process, by the identity of the job object their worker was
#: given: a worker's own threads find theirs, and an abandoned attempt never reports for a newer
#: one. (A UUID key would cost more to hash than the rest of the bookkeeping of a run.)
_running: dict[int, Attempt] = {}
_first_report_lock = threading.Lock()


def begin_reporting(
    job: Job,
    send: Callable[[Any], None] | None = None,
    *,
    on_report: Callable[[Any], None] | None = None,
) -> Attempt:
    """Route ``job.report_progress`` to this attempt while it runs (``send``: where values
    go, throttled; ``on_report``: called with every accepted value); :func:`end_reporting`
    ends it."""
    attempt = Attempt(job, send, on_report)
    _running[id(job)] = attempt
    return attempt


def end_reporting(attempt: Attempt) -> Any:
    """Stop routing the attempt's reports; returns the last value it did not send (None when
    there is none), for the attempt's outcome to carry."""
    key = id(attempt.job)
    if _running.get(key) is attempt:
        del _running[key]
    reporter = attempt.reporter
    return None if reporter is None else reporter.unsent()


def report(job: Job, value: Any) -> None:
    """What :meth:`Job.report_progress` does: hand ``value`` to the job's running attempt."""
    attempt = _running.get(id(job))
    if attempt is None or attempt.job is not job:
        storable_progress(value)  # a bad value is named first, wherever it is reported
        raise NotRunningError(
            f"job {job.id} is not running here: report_progress works on the job a worker "
            "was given, while its attempt runs (use kickside_engine.testing.perform_job in "
            "tests)"
        )
    reporter = attempt.reporter
    if reporter is None:
        with _first_report_lock:  # the worker's threads may race to the first report
            if attempt.reporter is None:
                attempt.reporter = ProgressReporter(attempt.send, on_report=attempt.on_report)
            reporter = attempt.reporter
    reporter.report(value)
