"""Waiting for a job to finish: :func:`wait_for`.

A job's result is written by the settle statement that completes it
(:mod:`kickside_engine.store.settle`), so a waiter reads the job until it is final. The read is
one primary-key lookup; between reads the waiter sleeps, 10 ms at first, growing by half each
time up to 200 ms, so a quick job is seen quickly and a long one costs five reads a second,
never a busy loop. Completions are not notified on PostgreSQL (a notification per finished job
would tax the pool's hot path, see :mod:`kickside_engine.store.listen`), so both databases wait
the same way.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kickside_engine.api import get_job
from kickside_engine.errors import InvalidArgumentError, NotFoundError, WaitTimeoutError
from kickside_engine.models import FINAL_STATES, Job, JobState
from kickside_engine.store.database import Database

#: The first pause between two reads of the job, and the longest.
FIRST_POLL_SECONDS = 0.01
MAX_POLL_SECONDS = 0.2
_GROWTH = 1.5


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
    while True:
        outcome = waiting.after(get_job(db, job_id))
        if isinstance(outcome, JobResult):
            return outcome
        time.sleep(outcome)


class Waiting:
    """The rules of one wait, for :func:`wait_for` and its async twin alike: what each read
    of the job means, and how long to pause before the next."""

    def __init__(self, job_id: uuid.UUID | str, timeout: float | timedelta | None) -> None:
        self.job_id = job_id
        self.limit = _timeout_seconds(timeout)
        self.deadline = None if self.limit is None else time.monotonic() + self.limit
        self.pause = FIRST_POLL_SECONDS

    def after(self, job: Job | None) -> JobResult | float:
        """How the wait ended with ``job`` as just read, or the seconds to pause before the
        next read; raises :class:`NotFoundError` or :class:`WaitTimeoutError`."""
        if job is None:
            raise NotFoundError(f"no job with id {self.job_id}", {"job_id": str(self.job_id)})
        if job.state in FINAL_STATES:
            return JobResult.of(job)
        pause = self.pause
        self.pause = min(pause * _GROWTH, MAX_POLL_SECONDS)
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
