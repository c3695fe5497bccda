"""Bulk actions by filter on both backends: preview, batched apply of exactly the previewed
jobs, progress, audit, jobs that moved on, and the safety rules (completed jobs, empty filters).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    ConflictError,
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
from kickside_engine.clock import utcnow
from kickside_engine.control import (
    Actor,
    JobFilter,
    cancel_job,
    delete_job,
    discard_job,
    list_audit,
    list_runs,
)
from kickside_engine.control.bulk import BulkResult, bulk_apply, bulk_preview
from kickside_engine.execution import execute
from kickside_engine.purge import RUNS_PER_CALL, purge_slot
from kickside_engine.testing import drain_jobs

from ..support.workers import registry

ALICE = Actor("alice", "ops-1")


def many(db: Database, n: int, queue: str = "default", **args: Any) -> list[uuid.UUID]:
    builders = [JobBuilder("ok", {**args, "i": i}).queue(queue) for i in range(n)]
    return [i.id for i in enqueue_many(db, builders)]


def states(db: Database, job_ids: list[uuid.UUID]) -> set[JobState]:
    return {get_job(db, i).state for i in job_ids}  # type: ignore[union-attr]


def apply(db: Database, action: str, flt: JobFilter, **options: Any) -> BulkResult:
    """Preview, then apply that preview (an empty filter means every job here)."""
    preview = bulk_preview(db, action, flt, all_jobs=not flt.as_dict())
    return bulk_apply(db, preview, ALICE, utcnow(), **options)


def test_preview_counts_what_the_action_would_change_and_writes_nothing(db: Database) -> None:
    waiting = many(db, 12)
    busy = many(db, 2, queue="busy")
    assert len(claim(db, queue="busy", node="n1", limit=2)) == 2
    done = many(db, 3, queue="done")
    apply(db, "cancel", JobFilter(queues=("done",)))

    everything = JobFilter()
    cancel = bulk_preview(db, "cancel", everything, all_jobs=True)
    assert (cancel.action, cancel.count) == ("cancel", 14)  # not the 3 already cancelled
    assert len(cancel.sample) == 10
    assert [j.id for j in cancel.sample] == [
        j.id for j in sorted(cancel.sample, key=lambda j: (j.inserted_at, j.id), reverse=True)
    ]
    retry = bulk_preview(db, "retry", everything, all_jobs=True, sample=50)
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
    result = apply(
        db,
        "discard",
        flt,
        batch=5,
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert result == BulkResult("discard", matched=23, changed=23, moved_on=0)
    assert progress == [(5, 23), (10, 23), (15, 23), (20, 23), (23, 23)]
    assert states(db, jobs) == {JobState.DISCARDED}
    assert bulk_preview(db, "cancel", JobFilter(), all_jobs=True).count == 4  # other queue
    entries = list_audit(db, action="bulk_discard").entries
    assert len(entries) == 5
    assert sorted(i for e in entries for i in e.details["ids"]) == sorted(str(i) for i in jobs)
    assert {(e.actor, e.host, e.target_type) for e in entries} == {("alice", "ops-1", "jobs")}
    assert all(e.details["filter"] == {"queues": ["imports"]} for e in entries)
    assert sorted(e.details["batch"] for e in entries) == [1, 2, 3, 4, 5]

    # And back: a bulk retry revives them all, each with one more attempt allowed.
    revived = apply(db, "retry", flt, batch=10)
    assert revived == BulkResult("retry", 23, 23, 0)
    assert states(db, jobs) == {JobState.AVAILABLE}
    assert len(list_audit(db, action="bulk_retry").entries) == 3


def test_bulk_cancel_aborts_executing_jobs_like_the_single_action(db: Database) -> None:
    many(db, 3, queue="busy")
    claimed = claim(db, queue="busy", node="n1", limit=3)
    assert len(claimed) == 3
    waiting = many(db, 4, queue="busy")
    result = apply(db, "cancel", JobFilter(queues=("busy",)), batch=3)
    assert (result.matched, result.changed, result.moved_on) == (7, 7, 0)
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
    result = apply(db, "cancel", JobFilter(tags=("import:7", "csv")))
    assert result.changed == 1 and states(db, [tagged]) == {JobState.CANCELLED}
    result = apply(db, "discard", JobFilter(search="_50%."))
    assert result.changed == 1 and states(db, [searched]) == {JobState.DISCARDED}
    assert states(db, [other_tag]) == {JobState.AVAILABLE}
    # A state filter narrows the action's own states: nothing final can be cancelled.
    none = apply(db, "cancel", JobFilter(states=(JobState.DISCARDED,)))
    assert none == BulkResult("cancel", 0, 0, 0)
    retried = apply(db, "retry", JobFilter(states=(JobState.DISCARDED,)))
    assert retried.changed == 1 and states(db, [searched]) == {JobState.AVAILABLE}


def test_jobs_that_stop_qualifying_midway_are_left_alone(db: Database) -> None:
    jobs = sorted(many(db, 10))
    late = jobs[-3:]  # the last ids: their batch comes last

    def meanwhile(done: int, total: int) -> None:
        if done == 4:  # after the first batch, an operator cancels three of the rest
            for job_id in late:
                cancel_job(db, job_id, Actor("bob", "ops-2"), utcnow())

    result = apply(db, "discard", JobFilter(), batch=4, on_progress=meanwhile)
    assert (result.matched, result.changed, result.moved_on) == (10, 7, 3)
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
            sa.update(job)
            .where(job.c.id == victim)
            .values(state="completed", completed_at=now, finalized_at=now)
        )
        worker = threading.Thread(target=lambda: results.append(apply(db, "cancel", JobFilter())))
        worker.start()
        # Wait until the batch has read its ids and waits for the lock on the victim.
        deadline = time.monotonic() + 30
        while not _waiting_on_a_lock(db):
            assert time.monotonic() < deadline, "the bulk never waited for the row lock"
            time.sleep(0.02)
        other.commit()
    worker.join(timeout=30)
    assert results == [BulkResult("cancel", matched=5, changed=4, moved_on=1)]
    assert states(db, [victim]) == {JobState.COMPLETED}
    assert states(db, [j for j in jobs if j != victim]) == {JobState.CANCELLED}
    (entry,) = list_audit(db, action="bulk_cancel").entries
    assert entry.details["moved_on"] == 1 and str(victim) not in entry.details["ids"]


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


QUEUE_X = JobFilter(queues=("x",))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda db: bulk_preview(db, "delete", QUEUE_X), "action"),
        (lambda db: bulk_preview(db, "retry", QUEUE_X, sample=101), "sample"),
        (lambda db: bulk_preview(db, "pause", QUEUE_X), "action"),
        (lambda db: bulk_apply(db, "retry", ALICE, utcnow()), "BulkPreview"),  # type: ignore[arg-type]
        (
            lambda db: bulk_apply(db, bulk_preview(db, "retry", QUEUE_X), ALICE, utcnow(), batch=0),
            "batch",
        ),
        (
            lambda db: bulk_apply(
                db, bulk_preview(db, "retry", QUEUE_X), ALICE, utcnow(), batch=10_000
            ),
            "batch",
        ),
        (lambda db: bulk_preview(db, "cancel", JobFilter()), "all_jobs"),
        (
            lambda db: bulk_preview(db, "retry", JobFilter(states=(JobState.COMPLETED,))),
            "include_completed",
        ),
    ],
)
def test_bad_bulk_arguments_are_refused(db: Database, call: Any, match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        call(db)


# --- issue 19: the previewed set, completed jobs, empty filters --------------------------------


def discarded(db: Database, n: int, queue: str) -> list[uuid.UUID]:
    jobs = many(db, n, queue=queue)
    for job_id in jobs:
        discard_job(db, job_id, ALICE, utcnow())
    return jobs


def test_a_job_that_arrives_or_comes_to_match_after_the_preview_is_untouched(
    db: Database,
) -> None:
    previewed = discarded(db, 3, "billing")
    running = many(db, 1, queue="billing")
    assert len(claim(db, queue="billing", node="n1", limit=1)) == 1
    preview = bulk_preview(db, "retry", JobFilter(queues=("billing",)), now=utcnow())
    assert preview.count == 3 and sorted(preview.job_ids()) == sorted(previewed)
    # After the preview: a new job fails into the filter, and the running one is discarded.
    arrived = discarded(db, 1, "billing")
    discard_job(db, running[0], ALICE, utcnow())
    assert bulk_preview(db, "retry", JobFilter(queues=("billing",))).count == 5
    result = bulk_apply(db, preview, ALICE, utcnow(), batch=2)
    assert result == BulkResult("retry", matched=3, changed=3, moved_on=0)
    assert states(db, previewed) == {JobState.AVAILABLE}
    assert states(db, arrived + running) == {JobState.DISCARDED}
    entries = list_audit(db, action="bulk_retry").entries
    assert sorted(i for e in entries for i in e.details["ids"]) == sorted(map(str, previewed))
    assert {e.details["previewed"] for e in entries} == {3}


def test_completed_jobs_are_not_retried_unless_asked(db: Database) -> None:
    done = many(db, 4, queue="billing")
    drain_jobs(db, registry, queue="billing")
    assert states(db, done) == {JobState.COMPLETED}
    failed = discarded(db, 2, "billing")
    billing = JobFilter(queues=("billing",))
    preview = bulk_preview(db, "retry", billing)
    assert (preview.count, preview.completed_excluded) == (2, 4)
    assert bulk_apply(db, preview, ALICE, utcnow()).changed == 2
    assert states(db, done) == {JobState.COMPLETED}
    assert states(db, failed) == {JobState.AVAILABLE}
    # Every job, no filter: still not the completed ones.
    everything = bulk_preview(db, "retry", JobFilter(), all_jobs=True)
    assert everything.count == 0 and everything.completed_excluded == 4
    # Naming the completed state is refused without the flag, and works with it.
    with pytest.raises(InvalidArgumentError, match="include_completed"):
        bulk_preview(db, "retry", JobFilter(states=(JobState.COMPLETED,)))
    asked = bulk_preview(db, "retry", billing, include_completed=True)
    assert (asked.count, asked.completed_excluded) == (4, 0)
    assert bulk_apply(db, asked, ALICE, utcnow()).changed == 4
    assert states(db, done) == {JobState.AVAILABLE}
    (entry, *_) = list_audit(db, action="bulk_retry").entries
    assert entry.details["include_completed"] is True


def test_an_empty_filter_needs_all_jobs(db: Database) -> None:
    jobs = many(db, 3)
    with pytest.raises(InvalidArgumentError, match="all_jobs"):
        bulk_preview(db, "discard", JobFilter())
    preview = bulk_preview(db, "discard", JobFilter(), all_jobs=True)
    assert preview.all_jobs and preview.needs_typed_count and preview.count == 3
    assert bulk_apply(db, preview, ALICE, utcnow()).changed == 3
    assert states(db, jobs) == {JobState.DISCARDED}
    (entry,) = list_audit(db, action="bulk_discard").entries
    assert entry.details["all_jobs"] is True and entry.details["filter"] == {}


def test_the_result_counts_the_jobs_that_moved_on(db: Database) -> None:
    jobs = sorted(many(db, 6, queue="mailers"))
    preview = bulk_preview(db, "cancel", JobFilter(queues=("mailers",)))
    assert not preview.needs_typed_count
    bob = Actor("bob", "ops-2")
    cancel_job(db, jobs[0], bob, utcnow())  # finished meanwhile: moved on
    delete_job(db, jobs[1], bob, utcnow())  # gone: moved on
    assert len(claim(db, queue="mailers", node="n1", limit=1)) == 1  # still cancellable
    result = bulk_apply(db, preview, ALICE, utcnow())
    assert result == BulkResult("cancel", matched=6, changed=4, moved_on=2)
    assert result.summary() == "bulk cancel: 4 changed, 2 had moved on"
    assert BulkResult("retry", 3, 3, 0).summary() == "bulk retry: 3 changed"
    assert states(db, jobs[2:]) == {JobState.CANCELLED}


def test_a_large_preview_asks_for_the_count_and_stays_exact(db: Database) -> None:
    jobs = many(db, 101, queue="big")
    preview = bulk_preview(db, "discard", JobFilter(queues=("big",)), sample=3)
    assert preview.count == 101 and preview.needs_typed_count and len(preview.sample) == 3
    more = many(db, 5, queue="big")
    result = bulk_apply(db, preview, ALICE, utcnow(), batch=50)
    assert (result.matched, result.changed, result.moved_on) == (101, 101, 0)
    assert states(db, jobs) == {JobState.DISCARDED} and states(db, more) == {JobState.AVAILABLE}


def test_a_previewed_retry_leaves_a_slot_being_purged_alone(db: Database) -> None:
    slot = enqueue(db, JobBuilder("ok", {}).slot("app", "s", "k")).id
    (claimed,) = claim(db, queue="default", node="n1")
    record(db, [(claimed, execute(registry, claimed))], registry=registry)
    assert states(db, [slot]) == {JobState.PARKED}
    run = db.tables.job_run
    with db.begin() as conn:  # more history than one purge call deletes
        (started,) = conn.execute(sa.select(run.c.started_at).where(run.c.job_id == slot)).one()
        conn.execute(
            sa.insert(run),
            [
                {
                    "job_id": slot,
                    "attempt": 1,
                    "queue": "default",
                    "worker": "ok",
                    "node": "n1",
                    "lease_token": uuid.uuid4(),
                    "started_at": started,
                    "finished_at": started,
                    "duration_ms": 0,
                    "outcome": RunOutcome.COMPLETED.value,
                }
                for _ in range(RUNS_PER_CALL)
            ],
        )
    preview = bulk_preview(db, "retry", JobFilter(states=(JobState.PARKED,)))
    assert preview.count == 1
    with pytest.raises(ConflictError) as pending:
        purge_slot(db, namespace="app", scope="s", key="k")
    assert pending.value.details["needs_continue"] is True
    assert bulk_apply(db, preview, ALICE, utcnow()) == BulkResult("retry", 1, 0, 1)
    assert states(db, [slot]) == {JobState.PARKED}
