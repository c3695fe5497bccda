"""Bulk actions by filter on both backends: preview, batched apply, progress, audit, skips."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    Database,
    InvalidArgumentError,
    JobBuilder,
    JobState,
    RunOutcome,
    claim,
    enqueue,
    enqueue_many,
    get_job,
    record,
)
from kickside_engine.bulk import BulkResult, bulk_apply, bulk_preview
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, JobFilter, cancel_job, list_audit, list_runs
from kickside_engine.execution import execute

from ..support.workers import registry

ALICE = Actor("alice", "ops-1")


def many(db: Database, n: int, queue: str = "default", **args: Any) -> list[uuid.UUID]:
    builders = [JobBuilder("ok", {**args, "i": i}).queue(queue) for i in range(n)]
    return [i.id for i in enqueue_many(db, builders)]


def states(db: Database, job_ids: list[uuid.UUID]) -> set[JobState]:
    return {get_job(db, i).state for i in job_ids}  # type: ignore[union-attr]


def test_preview_counts_what_the_action_would_change_and_writes_nothing(db: Database) -> None:
    waiting = many(db, 12)
    busy = many(db, 2, queue="busy")
    assert len(claim(db, queue="busy", node="n1", limit=2)) == 2
    done = many(db, 3, queue="done")
    bulk_apply(db, "cancel", JobFilter(queues=("done",)), ALICE, utcnow())

    everything = JobFilter()
    cancel = bulk_preview(db, "cancel", everything)
    assert (cancel.action, cancel.count) == ("cancel", 14)  # not the 3 already cancelled
    assert len(cancel.sample) == 10
    assert [j.id for j in cancel.sample] == [
        j.id for j in sorted(cancel.sample, key=lambda j: (j.inserted_at, j.id), reverse=True)
    ]
    retry = bulk_preview(db, "retry", everything, sample=50)
    # Retry skips executing and available jobs: only the cancelled ones qualify.
    assert retry.count == 3 and {j.id for j in retry.sample} == set(done)
    assert bulk_preview(db, "discard", JobFilter(queues=("busy",)), sample=0).sample == []
    assert bulk_preview(db, "discard", JobFilter(queues=("busy",))).count == 2
    assert bulk_preview(db, "cancel", JobFilter(states=(JobState.COMPLETED,))).count == 0
    assert states(db, waiting) == {JobState.AVAILABLE}
    assert states(db, busy) == {JobState.EXECUTING}
    assert [e.action for e in list_audit(db).entries] == ["bulk_cancel"]


def test_apply_works_in_batches_with_progress_and_one_audit_row_each(db: Database) -> None:
    jobs = many(db, 23, queue="imports")
    many(db, 4, queue="other")
    progress: list[tuple[int, int]] = []
    flt = JobFilter(queues=("imports",))
    result = bulk_apply(
        db, "discard", flt, ALICE, utcnow(), batch=5,
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert result == BulkResult("discard", matched=23, changed=23, skipped=0)
    assert progress == [(5, 23), (10, 23), (15, 23), (20, 23), (23, 23)]
    assert states(db, jobs) == {JobState.DISCARDED}
    assert bulk_preview(db, "cancel", JobFilter()).count == 4  # the other queue is untouched
    entries = list_audit(db, action="bulk_discard").entries
    assert len(entries) == 5
    assert sorted(i for e in entries for i in e.details["ids"]) == sorted(str(i) for i in jobs)
    assert {(e.actor, e.host, e.target_type) for e in entries} == {("alice", "ops-1", "jobs")}
    assert all(e.details["filter"] == {"queues": ["imports"]} for e in entries)
    assert sorted(e.details["batch"] for e in entries) == [1, 2, 3, 4, 5]

    # And back: a bulk retry revives them all, each with one more attempt allowed.
    revived = bulk_apply(db, "retry", flt, ALICE, utcnow(), batch=10)
    assert revived == BulkResult("retry", 23, 23, 0)
    assert states(db, jobs) == {JobState.AVAILABLE}
    assert len(list_audit(db, action="bulk_retry").entries) == 3


def test_bulk_cancel_aborts_executing_jobs_like_the_single_action(db: Database) -> None:
    many(db, 3, queue="busy")
    claimed = claim(db, queue="busy", node="n1", limit=3)
    assert len(claimed) == 3
    waiting = many(db, 4, queue="busy")
    result = bulk_apply(db, "cancel", JobFilter(queues=("busy",)), ALICE, utcnow(), batch=3)
    assert (result.matched, result.changed, result.skipped) == (7, 7, 0)
    assert states(db, waiting + [c.job.id for c in claimed]) == {JobState.CANCELLED}
    for c in claimed:
        (run,) = list_runs(db, c.job.id)
        assert run.outcome is RunOutcome.CANCELLED and run.finished_at is not None
    late = record(db, [(c, execute(registry, c)) for c in claimed], registry=registry)
    assert late == set()


def test_bulk_honours_tags_search_and_states(db: Database) -> None:
    tagged = enqueue(db, JobBuilder("ok", {"import_id": 7}).tags(["import:7", "csv"])).id
    other_tag = enqueue(db, JobBuilder("ok", {"import_id": 8}).tags(["import:8"])).id
    searched = enqueue(db, JobBuilder("ok", {"file": "report_50%.csv"})).id
    result = bulk_apply(db, "cancel", JobFilter(tags=("import:7", "csv")), ALICE, utcnow())
    assert result.changed == 1 and states(db, [tagged]) == {JobState.CANCELLED}
    result = bulk_apply(db, "discard", JobFilter(search="_50%."), ALICE, utcnow())
    assert result.changed == 1 and states(db, [searched]) == {JobState.DISCARDED}
    assert states(db, [other_tag]) == {JobState.AVAILABLE}
    # A state filter narrows the action's own states: nothing final can be cancelled.
    none = bulk_apply(db, "cancel", JobFilter(states=(JobState.DISCARDED,)), ALICE, utcnow())
    assert none == BulkResult("cancel", 0, 0, 0)
    retried = bulk_apply(db, "retry", JobFilter(states=(JobState.DISCARDED,)), ALICE, utcnow())
    assert retried.changed == 1 and states(db, [searched]) == {JobState.AVAILABLE}


def test_jobs_that_stop_qualifying_midway_are_left_alone(db: Database) -> None:
    jobs = sorted(many(db, 10))
    late = jobs[-3:]  # the last ids: their batch comes last

    def meanwhile(done: int, total: int) -> None:
        if done == 4:  # after the first batch, an operator cancels three of the rest
            for job_id in late:
                cancel_job(db, job_id, Actor("bob", "ops-2"), utcnow())

    result = bulk_apply(db, "discard", JobFilter(), ALICE, utcnow(), batch=4, on_progress=meanwhile)
    assert result.changed == 7 and result.matched == 7
    assert states(db, late) == {JobState.CANCELLED}
    assert states(db, jobs[:7]) == {JobState.DISCARDED}


def test_a_job_that_changes_while_its_batch_waits_for_the_lock_is_skipped(db: Database) -> None:
    if not db.is_postgresql:
        pytest.skip("SQLite has a single writer: no job changes under a running batch")
    jobs = sorted(many(db, 5))
    victim = jobs[2]
    job = db.tables.job
    results: list[BulkResult] = []
    with db.engine.connect() as other:
        other.begin()
        now = utcnow()
        other.execute(
            sa.update(job).where(job.c.id == victim)
            .values(state="completed", completed_at=now, finalized_at=now)
        )
        worker = threading.Thread(
            target=lambda: results.append(bulk_apply(db, "cancel", JobFilter(), ALICE, utcnow()))
        )
        worker.start()
        # Wait until the batch has read its ids and waits for the lock on the victim.
        deadline = time.monotonic() + 30
        while not _waiting_on_a_lock(db):
            assert time.monotonic() < deadline, "the bulk never waited for the row lock"
            time.sleep(0.02)
        other.commit()
    worker.join(timeout=30)
    assert results == [BulkResult("cancel", matched=5, changed=4, skipped=1)]
    assert states(db, [victim]) == {JobState.COMPLETED}
    assert states(db, [j for j in jobs if j != victim]) == {JobState.CANCELLED}
    (entry,) = list_audit(db, action="bulk_cancel").entries
    assert entry.details["skipped"] == 1 and str(victim) not in entry.details["ids"]


def _waiting_on_a_lock(db: Database) -> bool:
    with db.engine.connect() as conn:
        waiting = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE :schema"
            ),
            # The schema is this test's own; the query text is cut before its FOR UPDATE.
            {"schema": f"SELECT %{db.schema}.kickside_job%"},
        ).scalar_one()
    return bool(waiting)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda db: bulk_preview(db, "delete", JobFilter()), "action"),
        (lambda db: bulk_preview(db, "retry", JobFilter(), sample=101), "sample"),
        (lambda db: bulk_apply(db, "pause", JobFilter(), ALICE, utcnow()), "action"),
        (lambda db: bulk_apply(db, "retry", JobFilter(), ALICE, utcnow(), batch=0), "batch"),
        (lambda db: bulk_apply(db, "retry", JobFilter(), ALICE, utcnow(), batch=10_000), "batch"),
    ],
)
def test_bad_bulk_arguments_are_refused(db: Database, call: Any, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        call(db)
