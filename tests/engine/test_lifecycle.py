"""The one-shot job lifecycle, on both backends: the seed's "Testing" list."""

from __future__ import annotations

from datetime import timedelta

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
from kickside_engine.clock import utcnow
from kickside_engine.control import list_runs
from kickside_engine.execution import execute
from kickside_engine.testing import assert_enqueued, drain_jobs, refute_enqueued

from ..support.workers import SEEN, registry


def job(worker: str, args: dict | None = None) -> JobBuilder:
    return JobBuilder(worker, args or {})


def test_ok_job_completes_and_keeps_its_row(db: Database) -> None:
    inserted = enqueue(db, job("ok", {"n": 1}))
    assert not inserted.duplicate and inserted.state is JobState.AVAILABLE
    result = drain_jobs(db, registry)
    assert result.completed == 1
    done = get_job(db, inserted.id)
    assert done is not None
    assert done.state is JobState.COMPLETED and done.attempt == 1
    assert done.completed_at is not None and done.finalized_at == done.completed_at
    assert done.lease_token is None and done.lease_owner == "test:drain"
    (run,) = list_runs(db, inserted.id)
    assert run.outcome is RunOutcome.COMPLETED and run.finished_at is not None
    assert run.attempt == 1 and run.node == "test:drain" and run.duration_ms is not None


def test_failure_retries_with_backoff_then_discards_at_max_attempts(db: Database) -> None:
    inserted = enqueue(db, job("fail", {"message": "upstream 503"}).max_attempts(3))
    drain_jobs(db, registry)
    first = get_job(db, inserted.id)
    assert first is not None and first.state is JobState.RETRYABLE and first.attempt == 1
    # backoff: 1 ** 4 + 1 s base + up to 30 s jitter
    wait = first.scheduled_at - first.errors[0].at
    assert timedelta(seconds=2) <= wait <= timedelta(seconds=32)
    assert "RuntimeError: upstream 503" in first.errors[0].error
    drain_jobs(db, registry, with_scheduled=True)
    final = get_job(db, inserted.id)
    assert final is not None and final.state is JobState.DISCARDED and final.attempt == 3
    assert [e.attempt for e in final.errors] == [1, 2, 3]
    assert [r.outcome for r in list_runs(db, inserted.id)] == [RunOutcome.FAILED] * 3


def test_snooze_reschedules_without_consuming_an_attempt(db: Database) -> None:
    inserted = enqueue(db, job("snooze", {"seconds": 60, "times": 1}))
    drain_jobs(db, registry)
    snoozed = get_job(db, inserted.id)
    assert snoozed is not None and snoozed.state is JobState.SCHEDULED
    assert snoozed.meta["snoozed"] == 1 and snoozed.max_attempts == 21
    assert snoozed.scheduled_at > utcnow() + timedelta(seconds=50)
    drain_jobs(db, registry, with_scheduled=True)
    done = get_job(db, inserted.id)
    assert done is not None and done.state is JobState.COMPLETED


@pytest.mark.parametrize(
    ("worker", "state", "needle", "outcome"),
    [
        ("cancel", JobState.CANCELLED, "post 7 deleted", RunOutcome.CANCELLED),
        ("discard", JobState.DISCARDED, "invalid address", RunOutcome.DISCARDED),
    ],
)
def test_final_outcomes_record_their_reason(
    db: Database, worker: str, state: JobState, needle: str, outcome: RunOutcome
) -> None:
    inserted = enqueue(db, job(worker, {"post_id": 7}))
    drain_jobs(db, registry)
    final = get_job(db, inserted.id)
    assert final is not None and final.state is state and final.finalized_at is not None
    assert needle in final.errors[-1].error
    assert list_runs(db, inserted.id)[0].outcome is outcome


def test_a_job_of_an_unknown_worker_waits_without_using_an_attempt(db: Database) -> None:
    # A rolling deploy: new job types arrive before the pools that run them.
    inserted = enqueue(db, job("nobody_home", {"post_id": 7}))
    drained = drain_jobs(db, registry)
    waiting = get_job(db, inserted.id)
    assert waiting is not None and waiting.state is JobState.AVAILABLE
    assert waiting.attempt == 0 and waiting.errors == [] and list_runs(db, inserted.id) == []
    assert drained.total == 0 and drained.unknown_workers == {"nobody_home": 1}


def test_an_executor_without_the_worker_hands_the_job_back(db: Database) -> None:
    # Claimed for code that an upgrade then replaced: never discarded, the attempt not used.
    inserted = enqueue(db, job("nobody_home", {"post_id": 7}))
    (claimed,) = claim(db, queue="default", node="n1")
    record(db, [(claimed, execute(registry, claimed))], registry=registry)
    back = get_job(db, inserted.id)
    assert back is not None and back.state is JobState.AVAILABLE and back.attempt == 0
    assert back.lease_token is None and back.errors == []
    (run,) = list_runs(db, inserted.id)
    assert run.outcome is RunOutcome.RESCUED and "nobody_home" in (run.error or "")
    again = claim(db, queue="default", node="n2")
    assert [c.job.id for c in again] == [inserted.id] and again[0].attempt == 1


def test_a_panicking_worker_fails_its_attempt(db: Database) -> None:
    inserted = enqueue(db, job("panic"))
    drain_jobs(db, registry)
    failed = get_job(db, inserted.id)
    assert failed is not None and failed.state is JobState.RETRYABLE
    assert failed.errors[0].error.startswith("IndexError: list index out of range")
    assert "Traceback" in failed.errors[0].error


def test_timeout_fails_the_attempt(db: Database) -> None:
    inserted = enqueue(db, job("hang", {"seconds": 1}))
    drain_jobs(db, registry, timeout=timedelta(milliseconds=100))
    failed = get_job(db, inserted.id)
    assert failed is not None and failed.state is JobState.RETRYABLE
    assert failed.errors[0].error.startswith("timeout:")
    assert list_runs(db, inserted.id)[0].outcome is RunOutcome.TIMEOUT


def test_args_decode_for_the_worker_or_the_job_is_discarded(db: Database) -> None:
    SEEN.clear()
    good = enqueue(db, job("charge", {"customer_id": 1, "amount": 500}))
    bad = enqueue(db, job("charge", {"customer": 1}))
    drain_jobs(db, registry)
    assert ("charge", registry.get("charge").args_type(1, 500)) in SEEN  # type: ignore[union-attr]
    assert get_job(db, good.id).state is JobState.COMPLETED  # type: ignore[union-attr]
    discarded = get_job(db, bad.id)
    assert discarded is not None and discarded.state is JobState.DISCARDED
    assert "args don't decode for charge" in discarded.errors[0].error


def test_errors_are_capped_at_4_kb_and_the_last_20(db: Database) -> None:
    inserted = enqueue(db, job("chatty").max_attempts(25))
    for _ in range(23):
        drain_jobs(db, registry, with_scheduled=True, with_recursion=False)
    chatty = get_job(db, inserted.id)
    assert chatty is not None and chatty.attempt == 23
    assert len(chatty.errors) == 20 and chatty.errors[0].attempt == 4
    assert all(len(e.error.encode()) <= 4096 for e in chatty.errors)
    assert chatty.errors[-1].error.startswith("RuntimeError: xxx")


def test_job_errors_are_stored_redacted(db: Database) -> None:
    inserted = enqueue(db, job("leaky"))
    drain_jobs(db, registry)
    leaky = get_job(db, inserted.id)
    assert leaky is not None
    text = leaky.errors[0].error
    assert "not-a-password" not in text and "not-a-token" not in text
    assert "api.example.com/v1/charges" in text and "charge failed" in text
    with db.read() as conn:
        dump = " ".join(
            str(v) for row in conn.execute(sa.select(db.tables.job_run)) for v in row
        ) + " ".join(str(v) for row in conn.execute(sa.select(db.tables.job)) for v in row)
    assert "not-a-password" not in dump and "not-a-token" not in dump


def test_retry_hint_sets_a_floor_past_the_policy(db: Database) -> None:
    inserted = enqueue(db, job("rate_limited"))
    drain_jobs(db, registry)
    limited = get_job(db, inserted.id)
    assert limited is not None and limited.state is JobState.RETRYABLE
    assert limited.scheduled_at - limited.errors[0].at >= timedelta(hours=2)


def test_builder_options_are_stored(db: Database) -> None:
    when = utcnow() + timedelta(hours=1)
    inserted = (
        job("ok", {"user_id": 42})
        .queue("digests")
        .priority(12)
        .schedule_at(when)
        .max_attempts(5)
        .tags(["digest"])
        .tag("user:42")
        .meta({"source": "settings"})
        .meta({"extra": 1})
        .insert(db)
    )
    stored = get_job(db, inserted.id)
    assert stored is not None
    assert (stored.queue, stored.priority, stored.max_attempts) == ("digests", 9, 5)
    assert stored.state is JobState.SCHEDULED and stored.scheduled_at == when
    assert stored.tags == ["digest", "user:42"]
    assert stored.meta == {"source": "settings", "extra": 1}
    assert job("ok").priority(-3).options.priority == 0


@pytest.mark.parametrize(
    ("builder", "field"),
    [
        (lambda: JobBuilder("", {}), "worker"),
        (lambda: JobBuilder("ok", {}).queue("has space"), "queue"),
        (lambda: JobBuilder("ok", {"when": object()}), "args"),
        (lambda: JobBuilder("ok", {"x": float("nan")}), "args"),
        (lambda: JobBuilder("ok", {}).tags(["ok", 3]), "tags"),  # type: ignore[list-item]
        (lambda: JobBuilder("ok", {}).max_attempts(0), "max_attempts"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(db: Database, builder, field) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidArgumentError, match=field):
        enqueue(db, builder())
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar() == 0


def test_args_must_be_an_object() -> None:
    with pytest.raises(InvalidArgumentError, match="args must be a JSON object"):
        JobBuilder("ok", [1, 2])


def test_enqueue_commits_and_rolls_back_with_the_caller(db: Database) -> None:
    with pytest.raises(RuntimeError), db.begin() as conn:
        enqueue(db, job("ok", {"n": 1}), conn=conn)
        raise RuntimeError("the caller's work failed")
    refute_enqueued(db, worker="ok")
    with db.begin() as conn:
        enqueue(db, job("ok", {"n": 2}), conn=conn)
    assert_enqueued(db, worker="ok", args={"n": 2}, count=1)


def test_enqueue_many_writes_all_or_nothing_and_refuses_unique(db: Database) -> None:
    from kickside_engine import Unique

    inserted = enqueue_many(db, [job("ok", {"i": i}).queue(f"q{i % 3}") for i in range(250)])
    assert len({i.id for i in inserted}) == 250
    assert len(assert_enqueued(db, worker="ok")) == 250
    with pytest.raises(InvalidArgumentError, match="unique"):
        enqueue_many(db, [job("ok").unique(Unique.args())])
    with pytest.raises(InvalidArgumentError):
        enqueue_many(db, [job("ok", {"i": 1}), JobBuilder("ok", {"bad": {1, 2}})])
    assert len(assert_enqueued(db, worker="ok")) == 250


def test_claim_takes_jobs_in_priority_then_schedule_order(db: Database) -> None:
    low = enqueue(db, job("ok").priority(5))
    high = enqueue(db, job("ok").priority(0))
    later = enqueue(db, job("ok").priority(0).schedule_in(timedelta(hours=1)))
    claimed = claim(db, queue="default", node="n1", limit=10)
    assert [c.job.id for c in claimed] == [high.id, low.id]
    assert all(c.job.state is JobState.EXECUTING and c.job.attempt == 1 for c in claimed)
    assert all(c.job.lease_owner == "n1" and c.lease_token for c in claimed)
    assert len({c.lease_token for c in claimed}) == 2
    assert claim(db, queue="default", node="n2", limit=10) == []
    assert get_job(db, later.id).state is JobState.SCHEDULED  # type: ignore[union-attr]


def test_a_late_outcome_from_a_lost_lease_is_dropped(db: Database) -> None:
    inserted = enqueue(db, job("ok"))
    (claimed,) = claim(db, queue="default", node="n1")
    with db.begin() as conn:  # an operator (or the Lifeline) took the job away meanwhile
        conn.execute(
            sa.update(db.tables.job)
            .where(db.tables.job.c.id == inserted.id)
            .values(state="available", lease_token=None, lease_expires_at=None)
        )
    (reclaimed,) = claim(db, queue="default", node="n1")  # same node name, new token
    assert reclaimed.lease_token != claimed.lease_token
    settled = record(db, [(claimed, execute(registry, claimed))], registry=registry)
    assert settled == set()
    current = get_job(db, inserted.id)
    assert current is not None and current.state is JobState.EXECUTING
    assert current.lease_token == reclaimed.lease_token


def test_a_decorated_worker_builds_jobs_with_its_defaults(db: Database) -> None:
    from kickside_engine import WorkerRegistry

    reg = WorkerRegistry()

    @reg.worker("deliver_receipt", queue="mailers", max_attempts=10, priority=3)
    def deliver_receipt(args: dict, job: object) -> None:
        return None

    inserted = deliver_receipt.new({"order_id": 42}).insert(db)  # type: ignore[attr-defined]
    stored = get_job(db, inserted.id)
    assert stored is not None
    assert (stored.queue, stored.max_attempts, stored.priority) == ("mailers", 10, 3)
    assert stored.max_execution_ms == 300_000
    assert drain_jobs(db, reg).completed == 1


def test_an_insert_notifies_pools_everywhere_when_it_commits(db: Database) -> None:
    if not db.is_postgresql:
        pytest.skip("cross-process wake-ups are PostgreSQL's LISTEN/NOTIFY")
    import queue as stdlib_queue

    from kickside_engine import listen

    heard: stdlib_queue.Queue[str] = stdlib_queue.Queue()
    listener = listen(db, heard.put)
    try:
        assert listener.connected.wait(10)
        with pytest.raises(RuntimeError), db.begin() as conn:
            enqueue(db, job("ok").queue("rolled_back"), conn=conn)
            raise RuntimeError("rollback")
        enqueue(db, job("ok").queue("committed"))
        assert heard.get(timeout=10) == "committed"  # the rolled-back insert said nothing
    finally:
        listener.stop()
