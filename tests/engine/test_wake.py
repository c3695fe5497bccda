"""Waking jobs, on both backends: wake_job (with and without ensure_due), wake_multi, and
nudge_workers. The fan-out race runs in real processes.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from kickside_engine import (
    ClaimedJob,
    ConflictError,
    Database,
    DatabaseUnavailableError,
    InvalidArgumentError,
    Job,
    JobBuilder,
    JobState,
    NotFoundError,
    claim,
    complete,
    connect_database,
    enqueue,
    fail,
    get_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.slots import disable_slot, nudge_workers, wake_job, wake_multi
from kickside_engine.store.notify import channel_name, local_signal
from kickside_engine.wake import WakeKey, WakeResult

from ..conftest import Target
from ..support import slot_procs

NS, SCOPE = "app.sync", "tenant:1"


def slot(key: str, *, queue: str = "default") -> JobBuilder:
    return JobBuilder("ok", {}).slot(NS, SCOPE, key).queue(queue)


def current(db: Database, job_id: uuid.UUID) -> Job:
    found = get_job(db, job_id)
    assert found is not None
    return found


def claim_one(db: Database, queue: str = "default", now: datetime | None = None) -> ClaimedJob:
    (claimed,) = claim(db, queue=queue, node="n1", now=now)
    return claimed


def parked(db: Database, key: str, queue: str = "default") -> uuid.UUID:
    inserted = enqueue(db, slot(key, queue=queue))
    claimed = claim_one(db, queue)
    assert claimed.job.id == inserted.id and complete(db, claimed)
    assert current(db, inserted.id).state is JobState.PARKED
    return inserted.id


def running(db: Database, key: str) -> tuple[uuid.UUID, ClaimedJob]:
    inserted = enqueue(db, slot(key, queue="running"))
    claimed = claim_one(db, "running")
    assert claimed.job.id == inserted.id
    return inserted.id, claimed


# --- wake_job without ensure_due: the ordinary control and demand wakes -----------------------


def test_a_control_wake_makes_parked_work_due(db: Database) -> None:
    job_id = parked(db, "a")
    now = utcnow()
    result = wake_job(db, job_id, now=now)
    assert result == WakeResult(job_id, JobState.AVAILABLE, woke=True, already_due=False)
    job = current(db, job_id)
    assert job.state is JobState.AVAILABLE and job.scheduled_at == now
    assert job.control_pending and not job.demand_pending and job.demand_seq == 0


def test_ordinary_demand_counts_every_wake(db: Database) -> None:
    job_id = parked(db, "a")
    for _ in range(3):
        assert wake_job(db, str(job_id), control=False).woke
    job = current(db, job_id)
    assert job.state is JobState.AVAILABLE and job.demand_pending and not job.control_pending
    assert job.demand_seq == 3


def test_the_ordinary_wake_reschedules_pending_work_to_now(db: Database) -> None:
    then = utcnow()
    future = enqueue(db, slot("f").schedule_in(timedelta(hours=1)), now=then)
    past = enqueue(db, slot("p"), now=then)
    now = then + timedelta(minutes=5)
    for job_id in (future.id, past.id):
        assert wake_job(db, job_id, now=now).state is JobState.AVAILABLE
        assert current(db, job_id).scheduled_at == now


def test_a_running_slot_keeps_the_wake_for_a_follow_up(db: Database) -> None:
    job_id, claimed = running(db, "r")
    result = wake_job(db, job_id, control=False)
    assert result.state is JobState.EXECUTING and result.woke
    job = current(db, job_id)
    assert job.demand_pending and job.lease_token == claimed.lease_token
    assert complete(db, claimed)
    assert current(db, job_id).state is JobState.AVAILABLE


def test_only_a_control_wake_cuts_a_retry_backoff_short(db: Database) -> None:
    inserted = enqueue(db, slot("r"))
    assert fail(db, claim_one(db), "upstream 503")
    backoff_until = current(db, inserted.id).scheduled_at
    assert wake_job(db, inserted.id, control=False).state is JobState.RETRYABLE
    job = current(db, inserted.id)
    assert job.scheduled_at == backoff_until and job.demand_pending and job.attempt == 1
    now = utcnow()
    assert wake_job(db, inserted.id, now=now).state is JobState.AVAILABLE
    assert current(db, inserted.id).scheduled_at == now


def test_a_disabled_slot_records_the_wake_and_stays_disabled(db: Database) -> None:
    job_id = parked(db, "d")
    disable_slot(db, job_id)
    result = wake_job(db, job_id)
    assert result.state is JobState.DISABLED and result.woke and not result.already_due
    assert current(db, job_id).control_pending


def test_finished_absent_and_malformed_jobs_are_refused(db: Database) -> None:
    oneshot = enqueue(db, JobBuilder("ok", {}))
    assert complete(db, claim_one(db))
    with pytest.raises(ConflictError) as raised:
        wake_job(db, oneshot.id)
    assert raised.value.details == {"state": "completed"}
    with pytest.raises(NotFoundError):
        wake_job(db, uuid.uuid4())
    with pytest.raises(InvalidArgumentError, match="job id"):
        wake_job(db, "not-a-uuid")


def test_a_wake_commits_or_rolls_back_with_the_caller(db: Database) -> None:
    job_id = parked(db, "a")
    with pytest.raises(RuntimeError), db.begin() as conn:
        wake_job(db, job_id, conn=conn)
        raise RuntimeError("the caller's work failed")
    assert current(db, job_id).state is JobState.PARKED


# --- wake_job(ensure_due=True) ---------------------------------------------------------------


def test_ensure_due_leaves_a_due_pending_job_alone_but_notifies(db: Database) -> None:
    then = utcnow()
    inserted = enqueue(db, slot("a"), now=then)
    before = current(db, inserted.id)
    generation = local_signal(db).generation
    result = wake_job(db, inserted.id, ensure_due=True, now=then + timedelta(minutes=1))
    assert result == WakeResult(inserted.id, JobState.AVAILABLE, woke=False, already_due=True)
    assert current(db, inserted.id) == before  # schedule, demand and updated_at untouched
    assert local_signal(db).generation > generation


def test_ensure_due_never_asks_a_running_job_for_another_execution(db: Database) -> None:
    job_id, claimed = running(db, "r")
    before = current(db, job_id)
    result = wake_job(db, job_id, ensure_due=True)
    assert result.already_due and not result.woke and result.state is JobState.EXECUTING
    assert current(db, job_id) == before  # lease, demand and control state kept
    assert complete(db, claimed)
    assert current(db, job_id).state is JobState.PARKED


def test_ensure_due_keeps_the_retry_state_of_a_due_retry(db: Database) -> None:
    inserted = enqueue(db, slot("r"))
    assert fail(db, claim_one(db), "upstream 503")
    before = current(db, inserted.id)
    result = wake_job(db, inserted.id, ensure_due=True, now=before.scheduled_at)
    assert result.already_due and result.state is JobState.RETRYABLE
    assert current(db, inserted.id) == before


def test_ensure_due_gives_parked_disabled_and_future_jobs_the_ordinary_wake(db: Database) -> None:
    now = utcnow()
    asleep = parked(db, "p")
    off = parked(db, "d")
    disable_slot(db, off)
    future = enqueue(db, slot("f").schedule_in(timedelta(hours=1)), now=now).id
    retrying = enqueue(db, slot("r")).id
    assert fail(db, claim_one(db), "upstream 503")
    expected = {
        asleep: JobState.AVAILABLE,
        off: JobState.DISABLED,
        future: JobState.AVAILABLE,
        retrying: JobState.AVAILABLE,
    }
    for job_id, state in expected.items():
        result = wake_job(db, job_id, ensure_due=True, now=now)
        assert result == WakeResult(job_id, state, woke=True, already_due=False)
        job = current(db, job_id)
        assert job.control_pending
        if state is JobState.AVAILABLE:
            assert job.scheduled_at == now


# --- wake_multi ----------------------------------------------------------------------------


def key(name: str) -> WakeKey:
    return WakeKey(NS, SCOPE, name)


def test_wake_multi_gives_ordinary_demand_to_the_named_slots(db: Database) -> None:
    a, b, untouched = parked(db, "a"), parked(db, "b"), parked(db, "c")
    busy, claimed = running(db, "busy")
    off = parked(db, "off")
    disable_slot(db, off)
    oneshot = enqueue(db, JobBuilder("ok", {}).identity(NS, SCOPE, "oneshot").queue("o")).id
    now = utcnow()
    with db.begin() as conn:
        result = wake_multi(  # the kickside seed's order, (tx, db, keys), is accepted too
            conn,
            db,
            [
                key("b"),
                ("app.sync", "tenant:1", "a"),
                key("busy"),
                key("off"),
                key("oneshot"),
                key("gone"),
                key("a"),
            ],
            now=now,
        )
    assert sorted(result.woken) == sorted([a, b, busy, off])
    assert result.missing == [key("gone")]
    for job_id in (a, b):
        job = current(db, job_id)
        assert job.state is JobState.AVAILABLE and job.scheduled_at == now
        assert job.demand_pending and job.demand_seq == 1 and not job.control_pending
    assert current(db, busy).state is JobState.EXECUTING and current(db, busy).demand_pending
    assert current(db, off).state is JobState.DISABLED and current(db, off).demand_seq == 1
    assert current(db, untouched).state is JobState.PARKED
    assert not current(db, oneshot).demand_pending  # one-shot jobs are not slots
    assert complete(db, claimed)
    assert current(db, busy).state is JobState.AVAILABLE  # the follow-up


def test_wake_multi_neither_commits_nor_rolls_back(db: Database) -> None:
    a = parked(db, "a")
    with pytest.raises(RuntimeError), db.begin() as conn:
        assert wake_multi(db, [key("a")], conn=conn).woken == [a]
        assert conn.in_transaction()
        raise RuntimeError("the caller's work failed")
    assert current(db, a).state is JobState.PARKED and current(db, a).demand_seq == 0


def test_the_completing_job_joins_the_prelock_without_being_woken(db: Database) -> None:
    a = parked(db, "a")
    job_id, claimed = running(db, "completing")
    with db.begin() as conn:
        result = wake_multi(db, [key("a")], conn=conn, completion_job_id=job_id)
        assert complete(db, claimed, conn=conn)
    assert result.woken == [a] and result.locked == 2
    done = current(db, job_id)
    assert done.state is JobState.PARKED and done.demand_seq == 0


def test_a_completing_job_named_by_a_key_is_woken(db: Database) -> None:
    job_id, claimed = running(db, "completing")
    with db.begin() as conn:
        result = wake_multi(db, [key("completing")], conn=conn, completion_job_id=str(job_id))
        assert complete(db, claimed, conn=conn)
    assert result.woken == [job_id]
    assert current(db, job_id).state is JobState.AVAILABLE  # demand arrived during its run


def test_without_fan_out_rows_the_completion_takes_its_own_lock(db: Database) -> None:
    job_id, claimed = running(db, "completing")
    with db.begin() as conn:
        result = wake_multi(db, [key("nobody")], conn=conn, completion_job_id=job_id)
        assert complete(db, claimed, conn=conn)
    assert result.locked == 0 and result.woken == [] and result.missing == [key("nobody")]
    assert current(db, job_id).state is JobState.PARKED


@pytest.mark.parametrize(
    "bad", [("a", "", "k"), ("a", "b"), ("a", None, "k"), "a/b/k", ("a", "b", 3)]
)
def test_wake_keys_are_exact_identities(db: Database, bad: Any) -> None:
    with db.begin() as conn, pytest.raises(InvalidArgumentError, match="wake key"):
        wake_multi(db, [bad], conn=conn)
    with db.begin() as conn, pytest.raises(InvalidArgumentError, match="completion_job_id"):
        wake_multi(db, [key("a")], conn=conn, completion_job_id="nope")


@pytest.fixture
def statements(db: Database) -> Iterator[list[str]]:
    """Every statement sent to the database while the test runs, with its parameters."""
    seen: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        seen.append(f"{statement} {parameters!r}")

    sa.event.listen(db.engine, "before_cursor_execute", before)
    yield seen
    sa.event.remove(db.engine, "before_cursor_execute", before)


def test_wake_keys_are_published_before_any_row_is_locked(
    db: Database, statements: list[str]
) -> None:
    if not db.is_postgresql:
        pytest.skip("NOTIFY and row locks are PostgreSQL's; SQLite serialises writers")
    parked(db, "a")
    parked(db, "b")
    job_id, claimed = running(db, "completing")
    statements.clear()
    with db.begin() as conn:
        wake_multi(db, [key("b"), key("a")], conn=conn, completion_job_id=job_id)
        assert complete(db, claimed, conn=conn)
    publishes = [i for i, s in enumerate(statements) if "wake:app.sync/tenant:1/" in s]
    locks = [i for i, s in enumerate(statements) if "FOR UPDATE" in s]
    # The first lock is wake_multi's, in key order, the completing slot included; settling the
    # slot then reads its own row (already locked) for a purge requested while it ran.
    assert len(publishes) == 2 and locks
    assert max(publishes) < min(locks)
    assert "ORDER BY" in statements[locks[0]] and str(job_id) in statements[locks[0]]


def _listener(db: Database) -> psycopg.Connection[Any]:
    url = db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    listener = psycopg.connect(url, autocommit=True)
    listener.execute(f'LISTEN "{channel_name(db)}"')
    return listener


def _payloads_until(listener: psycopg.Connection[Any], last: str) -> list[str]:
    payloads: list[str] = []
    for note in listener.notifies(timeout=10):
        payloads.append(note.payload)
        if note.payload == last:
            return payloads
    raise AssertionError(f"no {last!r} notification; got {payloads}")


def test_wake_keys_and_queues_are_delivered_only_on_commit(db: Database) -> None:
    if not db.is_postgresql:
        pytest.skip("cross-process notification is PostgreSQL's LISTEN/NOTIFY")
    parked(db, "a", queue="sync")
    with _listener(db) as listener:
        with pytest.raises(RuntimeError), db.begin() as conn:
            wake_multi(db, [key("a")], conn=conn)
            raise RuntimeError("rolled back")
        with db.begin() as conn:
            wake_multi(db, [key("a"), key("gone")], conn=conn)
        assert nudge_workers(db) == 0
        payloads = _payloads_until(listener, "nudge")
    assert sorted(payloads) == sorted(
        ["wake:app.sync/tenant:1/a", "wake:app.sync/tenant:1/gone", "sync", "nudge"]
    )


# --- nudge_workers -------------------------------------------------------------------------


def register_node(db: Database, name: str, heartbeat_at: datetime) -> None:
    with db.begin() as conn:
        conn.execute(
            sa.insert(db.tables.node).values(
                name=name,
                host="h",
                pid=1,
                queues=["default"],
                started_at=heartbeat_at,
                heartbeat_at=heartbeat_at,
            )
        )


def test_nudge_counts_the_live_pools(db: Database) -> None:
    now = utcnow()
    assert nudge_workers(db, now=now) == 0
    register_node(db, "stale", now - timedelta(seconds=31))
    assert nudge_workers(db, now=now) == 0
    register_node(db, "fresh", now - timedelta(seconds=5))
    generation = local_signal(db).generation
    assert nudge_workers(db, now=now) == 1
    assert local_signal(db).generation > generation


def test_nudge_is_delivered_to_listening_pools(db: Database) -> None:
    if not db.is_postgresql:
        pytest.skip("cross-process notification is PostgreSQL's LISTEN/NOTIFY")
    register_node(db, "fresh", utcnow())
    with _listener(db) as listener:
        assert nudge_workers(db) == 1
        assert _payloads_until(listener, "nudge") == ["nudge"]


def test_a_failed_nudge_raises_so_the_caller_can_retry() -> None:
    unreachable = connect_database("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        with pytest.raises(DatabaseUnavailableError):
            nudge_workers(unreachable)
    finally:
        unreachable.dispose()


# --- concurrent fan-outs -------------------------------------------------------------------


@pytest.mark.slow
def test_concurrent_fan_outs_over_overlapping_keys_never_deadlock(
    db: Database, target: Target
) -> None:
    shared = [parked(db, f"shared{i}") for i in range(8)]
    own = {p: parked(db, f"own{p}", queue=f"own{p}") for p in range(6)}
    key_pool = [tuple(key(f"shared{i}")) for i in range(8)]
    key_pool += [tuple(key(f"own{p}")) for p in own]
    pool = slot_procs.spawn_pool(6)
    try:
        named_per_child = pool.starmap(
            slot_procs.fan_out,
            [
                (
                    target.url,
                    target.schema,
                    str(own[p]),
                    f"own{p}",
                    key_pool,
                    30,
                    random.randrange(1 << 30),
                )
                for p in own
            ],
        )
    finally:
        pool.close()
        pool.join()
    named: Counter[tuple[str, ...]] = Counter()
    for child in named_per_child:
        named.update(child)
    # Every fan-out that named a slot gave it exactly one unit of demand: none lost, none doubled.
    for i, job_id in enumerate(shared):
        assert current(db, job_id).demand_seq == named[tuple(key(f"shared{i}"))]
    for p, job_id in own.items():
        assert current(db, job_id).demand_seq == named[tuple(key(f"own{p}"))]
        assert current(db, job_id).state in (JobState.PARKED, JobState.AVAILABLE)
