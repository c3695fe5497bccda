"""The pool's batched settlement: same results as one-by-one recording, fenced by the lease."""

from __future__ import annotations

from datetime import timedelta

import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, JobState, RunOutcome, claim, enqueue_many, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import list_runs
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.store.settle import settle_batch, settle_batch_unnest


def _result(kind: ResultKind, error: str | None = None) -> ExecutionResult:
    return ExecutionResult(kind, utcnow(), 7, error=error)


def test_a_batch_of_mixed_outcomes_settles_each_job_and_run(db: Database) -> None:
    enqueue_many(db, [JobBuilder("ok", {"i": i}) for i in range(6)])
    claimed = claim(db, queue="default", node="n1", limit=6)
    assert len(claimed) == 6
    done = [settlement_for(c, _result(ResultKind.DONE)) for c in claimed[:3]]
    failed = [
        settlement_for(c, _result(ResultKind.ERROR, "RuntimeError: token=not-a-token"))
        for c in claimed[3:5]
    ]
    with db.begin() as conn:
        settle_batch(db, conn, done)  # one shape at a time, as the pool usually sees them
        if db.is_postgresql:  # a one-shape batch takes the single-statement path
            assert settle_batch_unnest(db, conn, failed)
        else:
            settle_batch(db, conn, failed)
        settle_batch(db, conn, [*done[:1], *failed[:1]])  # replays change nothing
    for c in claimed[:3]:
        job = get_job(db, c.job.id)
        assert job is not None and job.state is JobState.COMPLETED and job.finalized_at
        (run,) = list_runs(db, c.job.id)
        assert run.outcome is RunOutcome.COMPLETED and run.duration_ms == 7
    for c in claimed[3:5]:
        job = get_job(db, c.job.id)
        assert job is not None and job.state is JobState.RETRYABLE
        assert job.errors[0].attempt == 1 and "not-a-token" not in job.errors[0].error
        assert job.scheduled_at > utcnow() + timedelta(seconds=10)
        (run,) = list_runs(db, c.job.id)
        assert run.outcome is RunOutcome.FAILED and run.error and "[REDACTED]" in run.error
    untouched = get_job(db, claimed[5].job.id)
    assert untouched is not None and untouched.state is JobState.EXECUTING


def test_a_settlement_whose_lease_was_lost_changes_nothing(db: Database) -> None:
    enqueue_many(db, [JobBuilder("ok", {"i": i}) for i in range(2)])
    first, second = claim(db, queue="default", node="n1", limit=2)
    job = db.tables.job
    with db.begin() as conn:  # someone else took the first job away (and settled its run)
        conn.execute(
            sa.update(job)
            .where(job.c.id == first.job.id)
            .values(state="available", lease_token=None, lease_expires_at=None)
        )
        conn.execute(
            sa.update(db.tables.job_run)
            .where(db.tables.job_run.c.lease_token == first.lease_token)
            .values(finished_at=utcnow(), outcome="rescued")
        )
    with db.begin() as conn:
        settle_batch(
            db, conn, [settlement_for(c, _result(ResultKind.DONE)) for c in (first, second)]
        )
    assert get_job(db, first.job.id).state is JobState.AVAILABLE  # type: ignore[union-attr]
    assert list_runs(db, first.job.id)[0].outcome is RunOutcome.RESCUED
    assert get_job(db, second.job.id).state is JobState.COMPLETED  # type: ignore[union-attr]
