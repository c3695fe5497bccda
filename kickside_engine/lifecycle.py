"""Where a job goes after an attempt: the state machine applied to one execution result.

This module decides; :mod:`kickside_engine.store.settle` writes, fenced by the lease.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from kickside_engine.backoff import DEFAULT_BACKOFF, MAX_DELAY, Backoff
from kickside_engine.finality import final_values_of
from kickside_engine.models import ClaimedJob, JobKind, JobState, RunOutcome, assemble
from kickside_engine.redact import declared_sensitive_keys, redact_text, truncate
from kickside_engine.store.jobs import AvailableIfWoken
from kickside_engine.store.settle import Settlement
from kickside_engine.store.workflows import WORKFLOW_META

MAX_ERRORS = 20
MAX_ERROR_BYTES = 4096


class ResultKind(enum.StrEnum):
    """How an execution ended, as seen by whoever ran it."""

    DONE = "done"
    SNOOZE = "snooze"
    CANCEL = "cancel"
    DISCARD = "discard"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASH = "crash"
    #: The executor has no such worker (a job claimed for code that an upgrade then replaced):
    #: the job goes back to ``available`` for a pool that has it, without using an attempt.
    UNKNOWN_WORKER = "unknown_worker"


@dataclass(frozen=True)
class ExecutionResult:
    """The result of running one claimed job."""

    kind: ResultKind
    finished_at: datetime
    duration_ms: int
    error: str | None = None
    snooze: timedelta | None = None
    retry_after_ms: float | None = None
    demand_satisfied: bool = False
    park: bool = False
    #: What the worker returned, already checked by
    #: :func:`~kickside_engine.outcomes.storable_result`; None for nothing.
    result: Any = None
    #: The last progress reported and not yet sent to the pool (checked by
    #: :func:`~kickside_engine.progress.storable_progress`); None for nothing new.
    progress: Any = None


def done_result(finished_at: datetime, duration_ms: int) -> ExecutionResult:
    """``ExecutionResult(ResultKind.DONE, finished_at, duration_ms)``: a job that returned
    nothing, the result made most often (assembled, see
    :func:`~kickside_engine.models.assemble`)."""
    return assemble(
        ExecutionResult,
        kind=ResultKind.DONE,
        finished_at=finished_at,
        duration_ms=duration_ms,
        error=None,
        snooze=None,
        retry_after_ms=None,
        demand_satisfied=False,
        park=False,
        result=None,
        progress=None,
    )


def clean_error(text: str, sensitive_keys: Iterable[str] = ()) -> str:
    """Redact (with the job's declared ``sensitive_keys`` too: an error often quotes the
    args), then cap an error message at 4 KB (keeping its start)."""
    return truncate(redact_text(text, sensitive_keys), MAX_ERROR_BYTES)


def _errors_with(claimed: ClaimedJob, at: datetime, error: str) -> list[dict[str, Any]]:
    history = [
        {"attempt": e.attempt, "at": e.at.isoformat(), "error": e.error} for e in claimed.job.errors
    ]
    history.append({"attempt": claimed.job.attempt, "at": at.isoformat(), "error": error})
    return history[-MAX_ERRORS:]


def settlement_for(
    claimed: ClaimedJob,
    result: ExecutionResult,
    *,
    backoff: Backoff = DEFAULT_BACKOFF,
) -> Settlement:
    """The state change that records ``result`` for ``claimed``."""
    job = claimed.job
    now = result.finished_at
    values: dict[str, Any] = {"updated_at": now, "lease_token": None, "lease_expires_at": None}
    error = clean_error(result.error, declared_sensitive_keys(job.meta)) if result.error else None
    run_outcome: RunOutcome
    kind = result.kind
    if kind is ResultKind.DONE:
        run_outcome = RunOutcome.COMPLETED
        if job.kind is JobKind.SLOT:
            values.update(_slot_after_success(claimed, result, now))
            values["result"] = result.result  # a slot's result is its latest run's
        else:
            values.update(final_values_of(job, JobState.COMPLETED, now))
            if result.result is not None:
                # Only then: a settlement without a result keeps the common batch shape.
                values["result"] = result.result
    elif kind is ResultKind.SNOOZE:
        run_outcome = RunOutcome.SNOOZED
        delay = min(max(result.snooze or timedelta(0), timedelta(0)), MAX_DELAY)
        values.update(
            state=JobState.SCHEDULED.value,
            scheduled_at=now + delay,
            max_attempts=job.max_attempts + 1,
            meta={**job.meta, "snoozed": int(job.meta.get("snoozed", 0)) + 1},
        )
    elif kind is ResultKind.CANCEL:
        run_outcome = RunOutcome.CANCELLED
        values.update(final_values_of(job, JobState.CANCELLED, now))
        values["errors"] = _errors_with(claimed, now, error or "cancelled")
    elif kind is ResultKind.DISCARD:
        run_outcome = RunOutcome.DISCARDED
        values.update(final_values_of(job, JobState.DISCARDED, now))
        values["errors"] = _errors_with(claimed, now, error or "discarded")
    elif kind is ResultKind.UNKNOWN_WORKER:
        # Never ran: handed back, its attempt not charged (the run row says why).
        run_outcome = RunOutcome.RESCUED
        values.update(
            state=JobState.AVAILABLE.value, scheduled_at=now, attempt=max(0, job.attempt - 1)
        )
    else:
        run_outcome = {
            ResultKind.ERROR: RunOutcome.FAILED,
            ResultKind.TIMEOUT: RunOutcome.TIMEOUT,
            ResultKind.CRASH: RunOutcome.CRASHED,
        }[kind]
        error = error or kind.value
        values["errors"] = _errors_with(claimed, now, error)
        if job.attempt >= job.max_attempts:
            values.update(final_values_of(job, JobState.DISCARDED, now))
            if job.kind is JobKind.SLOT:
                # A slot never finalises: out of attempts it parks, keeping its demand.
                values = {k: v for k, v in values.items() if k not in _FINAL_KEYS}
                values.update(state=JobState.PARKED.value, attempt=0)
        else:
            delay = backoff.delay(job.attempt, result.retry_after_ms)
            values.update(state=JobState.RETRYABLE.value, scheduled_at=now + delay)
    if result.progress is not None:
        # The attempt's last report, written with its outcome; only then, so that a settlement
        # without one keeps the common batch shape and the progress written earlier.
        values["progress"] = result.progress
    return assemble(  # Settlement(...), as the pool makes one for every job it runs
        Settlement,
        job_id=job.id,
        node=claimed.node,
        lease_token=claimed.lease_token,
        values=values,
        run_outcome=run_outcome,
        run_error=error if run_outcome is not RunOutcome.COMPLETED else None,
        finished_at=now,
        duration_ms=result.duration_ms,
        extra={},
        slot=job.kind is JobKind.SLOT,
        workflow=WORKFLOW_META in job.meta,
    )


_FINAL_KEYS = {"finalized_at", "completed_at", "cancelled_at", "discarded_at", "unique_key"}


def _slot_after_success(
    claimed: ClaimedJob, result: ExecutionResult, now: datetime
) -> dict[str, Any]:
    """A slot that ran: run again if demand arrived meanwhile, else park.

    Demand present at claim time was consumed by the claim, so ``demand_pending`` on the row
    now means demand arrived during the run: a follow-up run, unless the worker proved it
    satisfied that demand (``demand_satisfied``) or asked to ``park``. A pending control wake
    always rearms the slot. The choice is made in SQL against the row as it is at the update,
    because demand may be committed by others until that very moment.
    """
    values: dict[str, Any] = {"attempt": 0, "scheduled_at": now}
    if result.demand_satisfied or result.park:
        values["demand_pending"] = False
        values["state"] = AvailableIfWoken(("control_pending",))
    else:
        values["state"] = AvailableIfWoken(("control_pending", "demand_pending"))
    return values
