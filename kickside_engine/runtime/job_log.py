"""The per-job log lines on ``kickside.job``: ``job.start`` when an executor takes a job, and
``job.stop`` (``job.exception`` for a failed attempt: a warning, an error for the last one)
when its result comes back; ``job.blocked_loop`` when an ``async def`` job held its executor's
event loop for long."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from kickside_engine.lifecycle import ExecutionResult, ResultKind, clean_error
from kickside_engine.models import ClaimedJob
from kickside_engine.redact import declared_sensitive_keys

log = logging.getLogger("kickside.job")
_FAILED = (ResultKind.ERROR, ResultKind.TIMEOUT, ResultKind.CRASH)


def starts_logged() -> bool:
    """Whether ``job.start`` lines are wanted: asked once per batch of starts, not per job."""
    return log.isEnabledFor(logging.INFO)


def log_start(claimed: ClaimedJob, now: datetime) -> None:
    """``job.start`` for ``claimed``, handed to an executor at ``now`` (for its wait time)."""
    job = claimed.job
    log.info(
        "job.start",
        extra={
            "job_id": str(job.id),
            "worker": job.worker,
            "queue": job.queue,
            "attempt": job.attempt,
            "queue_ms": int((now - job.scheduled_at) / timedelta(milliseconds=1)),
        },
    )


def log_stop(claimed: ClaimedJob, result: ExecutionResult) -> None:
    """``job.stop``, or ``job.exception`` with the error (redacted) for a failed attempt."""
    failed = result.kind in _FAILED
    if not log.isEnabledFor(logging.WARNING if failed else logging.INFO):
        return  # building the record's fields cost more than the rest of taking a result
    fields = {
        "job_id": str(claimed.job.id),
        "worker": claimed.job.worker,
        "queue": claimed.job.queue,
        "attempt": claimed.job.attempt,
        "duration_ms": result.duration_ms,
        "outcome": result.kind.value,
    }
    if failed:
        final = claimed.job.attempt >= claimed.job.max_attempts and not claimed.job.is_slot
        declared = declared_sensitive_keys(claimed.job.meta)
        fields["error"] = clean_error(result.error or result.kind.value, declared)
        log.log(logging.ERROR if final else logging.WARNING, "job.exception", extra=fields)
    else:
        log.info("job.stop", extra=fields)


def log_blocked_loop(claimed: ClaimedJob, seconds: float) -> None:
    """``job.blocked_loop`` (a warning): ``claimed`` ran ``seconds`` without yielding its async
    executor's event loop, stalling every other job there."""
    job = claimed.job
    log.warning(
        "job.blocked_loop",
        extra={
            "job_id": str(job.id),
            "worker": job.worker,
            "queue": job.queue,
            "attempt": job.attempt,
            "blocked_ms": int(seconds * 1000),
        },
    )
