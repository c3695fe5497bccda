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
    limit = _timeout_seconds(timeout)
    deadline = None if limit is None else time.monotonic() + limit
    pause = FIRST_POLL_SECONDS
    state: JobState | None = None
    while True:
        job = get_job(db, job_id)
        if job is None:
            raise NotFoundError(f"no job with id {job_id}", {"job_id": str(job_id)})
        if job.state in FINAL_STATES:
            return JobResult.of(job)
        state = job.state
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeoutError(
                    f"job {job.id} is still {state.value} after waiting {limit:g}s",
                    {"job_id": str(job.id), "state": state.value},
                )
            time.sleep(min(pause, left))
        else:
            time.sleep(pause)
        pause = min(pause * _GROWTH, MAX_POLL_SECONDS)


def _timeout_seconds(timeout: float | timedelta | None) -> float | None:
    if timeout is None:
        return None
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else timeout
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise InvalidArgumentError(
            f"timeout must be a non-negative number of seconds or a timedelta, got {timeout!r}"
        )
    return float(seconds)
