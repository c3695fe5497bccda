"""Waiting for a job to finish: :func:`wait_for`.

A job's result is written by the settle statement that completes it
(:mod:`kickside_engine.store.settle`), so a waiter reads the job (one primary-key lookup) when
it may have become final:

- On PostgreSQL the waiter flags the job as awaited, and the database notifies the moment it
  becomes final or is deleted (:mod:`kickside_engine.store.final_watch`: one listening
  connection per handle and process, whatever the number of waiters). Between notifications it
  reads the job every :data:`HEARD_POLL_SECONDS` as a safety net, never more often.
- On SQLite (and on a PostgreSQL schema older than revision 0012, during a rolling upgrade, or
  for a role that may only read, which cannot flag the job) it
  reads the job every 10 ms at first, the pause growing by half each time up to 200 ms: a
  quick job is seen quickly and a long one costs five reads a second, never a busy loop.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kickside_engine.api import get_job
from kickside_engine.errors import (
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    WaitTimeoutError,
)
from kickside_engine.ids import parse_uuid
from kickside_engine.models import FINAL_STATES, Job, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.final_watch import final_watch, hears_final, mark_awaited

#: The first pause between two reads of the job, and the longest (without notifications).
FIRST_POLL_SECONDS = 0.01
MAX_POLL_SECONDS = 0.2
_GROWTH = 1.5
#: The longest pause between two reads when the job's end is notified.
HEARD_POLL_SECONDS = 5.0


@dataclass(frozen=True)
class JobResult:
    """How a job ended: its final state, its worker's result and its last error.

    ``result`` is the stored JSON value (None when the worker returned nothing, or the job
    did not complete); ``error`` is the newest entry of the job's error history (for a
    completed job, that of an earlier failed attempt, if any), or None.
    """

    job_id: uuid.UUID
    state: JobState
    result: Any
    error: str | None

    @classmethod
    def of(cls, job: Job) -> JobResult:
        """The result of ``job`` as read."""
        return cls(job.id, job.state, job.result, job.errors[-1].error if job.errors else None)


def wait_for(
    db: Database,
    job_id: uuid.UUID | str,
    *,
    timeout: float | timedelta | None = None,
) -> JobResult:
    """Wait until the job is completed, cancelled or discarded; how it ended.

    ``timeout`` (seconds or a timedelta; None waits as long as it takes) bounds the wait:
    past it :class:`~kickside_engine.errors.WaitTimeoutError` is raised (the job may still
    finish later). An unknown or malformed id raises
    :class:`~kickside_engine.errors.NotFoundError`, as does a job pruned while waited for.
    A slot never becomes final: waiting for one ends only with the timeout.
    """
    waiting = Waiting(job_id, timeout)
    parsed = parse_uuid(job_id)
    heard = threading.Event()
    watch = (
        final_watch(db).watching(parsed, heard.set, waiting.left())
        if parsed is not None and hears_final(db)
        else contextlib.nullcontext(False)
    )
    with watch as listening:
        if listening:
            try:
                with db.begin() as conn:
                    mark_awaited(db, conn, parsed)  # type: ignore[arg-type]
            except PermissionDeniedError:  # a role that may only read: it reads the job
                listening = False
        waiting.heard = listening
        while True:
            heard.clear()
            outcome = waiting.after(get_job(db, job_id))
            if isinstance(outcome, JobResult):
                return outcome
            heard.wait(outcome)  # ends early when the job's end is heard


class Waiting:
    """The rules of one wait, for :func:`wait_for` and its async twin alike: what each read
    of the job means, and how long to pause before the next."""

    def __init__(self, job_id: uuid.UUID | str, timeout: float | timedelta | None) -> None:
        self.job_id = job_id
        self.limit = _timeout_seconds(timeout)
        self.deadline = None if self.limit is None else time.monotonic() + self.limit
        self.pause = FIRST_POLL_SECONDS
        #: Whether the job's end will be notified: then pause the longest between reads.
        self.heard = False

    def left(self) -> float | None:
        """Seconds until the timeout (None: no timeout)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def after(self, job: Job | None) -> JobResult | float:
        """How the wait ended with ``job`` as just read, or the seconds to pause before the
        next read; raises :class:`NotFoundError` or :class:`WaitTimeoutError`."""
        if job is None:
            raise NotFoundError(f"no job with id {self.job_id}", {"job_id": str(self.job_id)})
        if job.state in FINAL_STATES:
            return JobResult.of(job)
        pause = HEARD_POLL_SECONDS if self.heard else self.pause
        self.pause = min(self.pause * _GROWTH, MAX_POLL_SECONDS)
        if self.deadline is None:
            return pause
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeoutError(
                f"job {job.id} is still {job.state.value} after waiting {self.limit:g}s",
                {"job_id": str(job.id), "state": job.state.value},
            )
        return min(pause, left)


def _timeout_seconds(timeout: float | timedelta | None) -> float | None:
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise InvalidArgumentError(
            f"timeout must be a non-negative number of seconds or a timedelta, got {timeout!r}"
        )
    return float(seconds)
