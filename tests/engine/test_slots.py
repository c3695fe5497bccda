"""Slot jobs, on both backends: enrollment with demand, runs and follow-ups, failures, reads.

Follows the kickside seed's "Dependency interface" (get_job, job statuses, enqueue with demand)
and its completion and failure paragraphs. The races at the end run in real processes.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    Backoff,
    ClaimedJob,
    ConflictError,
    Database,
    DatabaseUnavailableError,
    InvalidArgumentError,
    Job,
    JobBuilder,
    JobKind,
    JobState,
    NotFoundError,
    Run,
    RunOutcome,
    WorkerRegistry,
    claim,
    complete,
    connect_database,
    enqueue,
    fail,
    get_job,
    get_job_statuses,
    get_job_statuses_tx,
    record,
)
from kickside_engine.clock import utcnow
from kickside_engine.execution import execute
from kickside_engine.slots import (
    disable_slot,
    enable_slot,
    enqueue_slot,
    list_slots,
    nudge_workers,
    park_job,
    wake_job,
)
from kickside_engine.store.rows import run_from_row

from ..conftest import Target
from ..support import racing, slot_procs

NS, SCOPE = "app.sync", "tenant:1"


def slot(key: str = "k1", *, demand: bool = False, worker: str = "ok") -> JobBuilder:
    return JobBuilder(worker, {"source": key}).slot(NS, SCOPE, key, demand=demand)


def current(db: Database, job_id: uuid.UUID | str) -> Job:
    found = get_job(db, job_id)
    assert found is not None
    return found


def runs(db: Database, job_id: uuid.UUID) -> list[Run]:
    run = db.tables.job_run
    with db.read() as conn:
        rows = conn.execute(sa.select(run).where(run.c.job_id == job_id).order_by(run.c.id))
        return [run_from_row(r) for r in rows]


def claim_one(db: Database, now: datetime | None = None, queue: str = "default") -> ClaimedJob:
    (claimed,) = claim(db, queue=queue, node="n1", now=now)
    return claimed


def claim_all(db: Database, queue: str = "default") -> int:
    """Run every claimable job of ``queue`` to completion; how many runs that took."""
    count = 0
    while batch := claim(db, queue=queue, node="n1"):
        for claimed in batch:
            assert complete(db, claimed)
            count += 1
    return count


# --- enrollment: "jobs.enqueue and jobs.enqueue_tx accept optional demand = true" ----------


def test_a_slot_without_demand_is_enqueued_like_any_job(db: Database) -> None:
    now = utcnow()
    inserted = enqueue(db, slot("k1"), now=now)
    assert not inserted.duplicate and inserted.state is JobState.AVAILABLE
    job = current(db, inserted.id)
    assert job.kind is JobKind.SLOT and (job.namespace, job.scope, job.identity_key) == (
        NS,
        SCOPE,
        "k1",
    )
    assert not job.demand_pending and not job.control_pending and job.demand_seq == 0
    later = enqueue(db, slot("k2").schedule_in(timedelta(hours=1)), now=now)
    assert later.state is JobState.SCHEDULED
    again = enqueue(db, JobBuilder("ok", {"other": True}).slot(NS, SCOPE, "k1"), now=now)
    assert again.duplicate and again.id == inserted.id and again.state is JobState.AVAILABLE
    assert current(db, inserted.id).args == {"source": "k1"}  # an enrolled slot is not rewritten


def test_enqueue_with_demand_enrolls_and_demands_in_one_commit(db: Database) -> None:
    now = utcnow()
    inserted = enqueue(db, slot(demand=True).schedule_in(timedelta(hours=1)), now=now)
    assert not inserted.duplicate and inserted.state is JobState.AVAILABLE
    job = current(db, inserted.id)
    assert job.control_pending and job.scheduled_at == now
    claimed = claim_one(db, now)
    assert claimed.job.id == inserted.id and not claimed.job.control_pending
    assert complete(db, claimed)
    assert current(db, inserted.id).state is JobState.PARKED


def test_demand_makes_parked_work_due(db: Database) -> None:
    inserted = enqueue(db, slot())
    assert complete(db, claim_one(db))
    assert current(db, inserted.id).state is JobState.PARKED
    now = utcnow()
    again = enqueue(db, slot(demand=True), now=now)
    assert again.duplicate and again.id == inserted.id and again.state is JobState.AVAILABLE
    job = current(db, inserted.id)
    assert job.control_pending and job.scheduled_at == now and job.attempt == 0


def test_demand_on_a_running_slot_retains_one_follow_up(db: Database) -> None:
    inserted = enqueue(db, slot())
    claimed = claim_one(db)
    again = enqueue(db, slot(demand=True))
    assert again.duplicate and again.state is JobState.EXECUTING
    running = current(db, inserted.id)
    assert running.control_pending and running.lease_token == claimed.lease_token
    assert complete(db, claimed)
    assert current(db, inserted.id).state is JobState.AVAILABLE
    assert claim_all(db) == 1  # the follow-up, then the slot parks
    assert current(db, inserted.id).state is JobState.PARKED
    assert len(runs(db, inserted.id)) == 2


def test_demand_keeps_a_retryable_backoff_and_a_disabled_state(db: Database) -> None:
    retrying = enqueue(db, slot("r"))
    assert fail(db, claim_one(db), "upstream 503")
    before = current(db, retrying.id)
    assert before.state is JobState.RETRYABLE
    again = enqueue(db, slot("r", demand=True))
    after = current(db, retrying.id)
    assert again.state is JobState.RETRYABLE and after.scheduled_at == before.scheduled_at
    assert after.control_pending

    off = enqueue(db, slot("d"))
    disable_slot(db, off.id)
    assert enqueue(db, slot("d", demand=True)).state is JobState.DISABLED
    assert current(db, off.id).control_pending
    assert enable_slot(db, off.id).state is JobState.AVAILABLE


def test_demand_on_an_active_one_shot_identity_is_a_conflict(db: Database) -> None:
    oneshot = enqueue(db, JobBuilder("ok", {}).identity(NS, SCOPE, "k1"))
    with pytest.raises(ConflictError) as raised:
        enqueue(db, slot("k1", demand=True))
    assert raised.value.details["identity_in_use"] == "oneshot"
    assert raised.value.details["job_id"] == str(oneshot.id)
    assert raised.value.exit_code == 4
    without = enqueue(db, slot("k1"))  # omitting demand keeps the ordinary enqueue answer
    assert without.duplicate and without.id == oneshot.id
    job = current(db, oneshot.id)
    assert job.kind is JobKind.ONESHOT and not job.control_pending
    assert complete(db, claim_one(db))  # a finished one-shot job releases its identity
    enrolled = enqueue(db, slot("k1", demand=True))
    assert not enrolled.duplicate and current(db, enrolled.id).kind is JobKind.SLOT


def test_enqueue_with_demand_commits_or_rolls_back_with_the_caller(db: Database) -> None:
    with pytest.raises(RuntimeError), db.begin() as conn:
        rolled_back = enqueue(db, slot(demand=True), conn=conn)
        raise RuntimeError("the caller's work failed")
    assert get_job(db, rolled_back.id) is None
    with db.begin() as conn:
        inserted = enqueue(db, slot(demand=True), conn=conn)
    assert nudge_workers(db) == 0  # after the commit; no pool registered, the demand waits
    assert current(db, inserted.id).state is JobState.AVAILABLE
    assert complete(db, claim_one(db))
    with pytest.raises(RuntimeError), db.begin() as conn:
        enqueue_slot(db, slot(demand=True), conn=conn)
        raise RuntimeError("the caller's work failed")
    job = current(db, inserted.id)
    assert job.state is JobState.PARKED and not job.control_pending


def test_a_slot_must_have_a_full_identity(db: Database) -> None:
    with pytest.raises(InvalidArgumentError, match="scope"):
        enqueue(db, JobBuilder("ok", {}).slot(NS, " ", "k"))
    with pytest.raises(InvalidArgumentError, match="slot"):
        enqueue_slot(db, JobBuilder("ok", {}))


# --- reading jobs: get_job, get_job_statuses, get_job_statuses_tx ------------------------


def test_get_job_reads_the_exact_job_or_none(db: Database) -> None:
    inserted = enqueue(db, slot())
    assert current(db, inserted.id).id == inserted.id
    assert current(db, str(inserted.id)).id == inserted.id
    assert get_job(db, uuid.uuid4()) is None
    assert get_job(db, "not-a-uuid") is None


def test_reads_raise_when_the_database_fails() -> None:
    unreachable = connect_database("postgresql+psycopg://nobody@127.0.0.1:1/none")
    try:
        with pytest.raises(DatabaseUnavailableError):
            get_job(unreachable, uuid.uuid4())
        with pytest.raises(DatabaseUnavailableError):
            get_job_statuses(unreachable, [uuid.uuid4()])
    finally:
        unreachable.dispose()


@pytest.fixture
def selects(db: Database) -> Iterator[list[str]]:
    """The SELECT statements sent to the database while the test runs."""
    seen: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", before)
    yield seen
    sa.event.remove(db.engine, "before_cursor_execute", before)


def test_get_job_statuses_reads_a_set_in_one_query(db: Database, selects: list[str]) -> None:
    a = enqueue(db, slot("a"))
    b = enqueue(db, slot("b").schedule_in(timedelta(hours=1)))
    selects.clear()
    statuses = get_job_statuses(db, [a.id, str(b.id), uuid.uuid4(), "junk", a.id])
    assert statuses == {a.id: JobState.AVAILABLE, b.id: JobState.SCHEDULED}
    assert len(selects) == 1
    assert get_job_statuses(db, ["junk"]) == {}


def test_get_job_statuses_tx_sees_the_callers_writes_and_leaves_its_transaction(
    db: Database,
) -> None:
    with pytest.raises(RuntimeError), db.begin() as conn:
        inserted = enqueue(db, slot(demand=True), conn=conn)
        seen = get_job_statuses_tx(conn, db, [inserted.id, "junk", uuid.uuid4()])
        assert seen == {inserted.id: JobState.AVAILABLE}
        assert get_job_statuses(db, [inserted.id]) == {}  # not committed: others see nothing
        assert conn.in_transaction()
        wake_job(db, inserted.id, conn=conn)  # the transaction is still usable
        assert get_job_statuses_tx(db, [inserted.id], conn) == {inserted.id: JobState.AVAILABLE}
        assert get_job_statuses(db, [inserted.id], conn=conn) == {inserted.id: JobState.AVAILABLE}
        raise RuntimeError("roll back")
    assert get_job_statuses(db, [inserted.id]) == {}


def test_runtime_sql_follows_the_hosts_database_mapping(db: Database, selects: list[str]) -> None:
    host = connect_database(engine=db.engine, schema=db.schema)  # the host's own engine
    inserted = enqueue(host, slot(demand=True))
    assert get_job_statuses(db, [inserted.id]) == {inserted.id: JobState.AVAILABLE}
    if db.schema is not None:
        assert all(f"{db.schema}.kickside_job" in s for s in selects if "kickside_job" in s)


# --- completion: demand_satisfied and park -------------------------------------------------


def test_demand_received_during_a_run_leaves_exactly_one_follow_up(db: Database) -> None:
    inserted = enqueue(db, slot(demand=True))
    claimed = claim_one(db)
    for _ in range(3):
        wake_job(db, inserted.id, control=False)
    assert complete(db, claimed)
    job = current(db, inserted.id)
    assert job.state is JobState.AVAILABLE and job.demand_seq == 3 and job.attempt == 0
    assert claim_all(db) == 1
    assert current(db, inserted.id).state is JobState.PARKED


def test_demand_satisfied_consumes_demand_received_during_the_run(db: Database) -> None:
    inserted = enqueue(db, slot(demand=True))
    claimed = claim_one(db)
    wake_job(db, inserted.id, control=False)
    assert complete(db, claimed, demand_satisfied=True)
    job = current(db, inserted.id)
    assert job.state is JobState.PARKED and not job.demand_pending and job.demand_seq == 1
    assert claim_all(db) == 0


def test_demand_satisfied_still_rearms_for_a_control_wake(db: Database) -> None:
    inserted = enqueue(db, slot(demand=True))
    claimed = claim_one(db)
    wake_job(db, inserted.id, control=False)
    wake_job(db, inserted.id, control=True)
    assert complete(db, claimed, demand_satisfied=True)
    job = current(db, inserted.id)
    assert job.state is JobState.AVAILABLE and job.control_pending and not job.demand_pending


def test_park_suppresses_ordinary_demand_but_keeps_the_history_status(db: Database) -> None:
    inserted = enqueue(db, slot(demand=True))
    claimed = claim_one(db)
    wake_job(db, inserted.id, control=False)
    assert complete(db, claimed, park=True)
    job = current(db, inserted.id)
    assert job.state is JobState.PARKED and not job.demand_pending
    assert [r.outcome for r in runs(db, inserted.id)] == [RunOutcome.COMPLETED]


def test_park_yields_to_a_pending_control_wake(db: Database) -> None:
    inserted = enqueue(db, slot(demand=True))
    claimed = claim_one(db)
    wake_job(db, inserted.id, control=False)
    wake_job(db, inserted.id, control=True)
    assert complete(db, claimed, park=True)
    assert current(db, inserted.id).state is JobState.AVAILABLE
    assert claim_all(db) == 1
    assert current(db, inserted.id).state is JobState.PARKED


# --- failure transitions: slot_retry, retry and retry_after_ms --------------------------------

flaky = WorkerRegistry()


class ProviderError(Exception):
    def __init__(self, hint: object) -> None:
        super().__init__("provider unavailable")
        self.retry_after_ms = hint


@flaky.worker(
    "flaky",
    backoff=Backoff(base=timedelta(seconds=2), jitter_per_attempt=timedelta(0)),
    slot_backoff=Backoff(base=timedelta(hours=1), jitter_per_attempt=timedelta(0)),
)
def flaky_worker(args: dict[str, Any], job: Job) -> None:
    hint = args.get("hint")
    if isinstance(hint, str):
        hint = {"nan": math.nan, "inf": math.inf}.get(hint, hint)
    raise ProviderError(hint)


def _waited(job: Job) -> timedelta:
    return job.scheduled_at - job.errors[-1].at


def test_slots_retry_with_slot_backoff_and_one_shots_with_retry(db: Database) -> None:
    the_slot = enqueue(db, slot("s", worker="flaky"))
    oneshot = enqueue(db, JobBuilder("flaky", {}).queue("other"))
    for queue in ("default", "other"):
        claimed = claim_one(db, queue=queue)
        assert record(db, [(claimed, execute(flaky, claimed))], registry=flaky)
    slot_job, oneshot_job = current(db, the_slot.id), current(db, oneshot.id)
    assert slot_job.state is oneshot_job.state is JobState.RETRYABLE
    assert _waited(slot_job) >= timedelta(hours=1)
    assert timedelta(seconds=2) <= _waited(oneshot_job) < timedelta(hours=1)


def test_the_configured_base_bounds_the_jitter_from_below() -> None:
    capped = Backoff(base=timedelta(seconds=10), cap=timedelta(seconds=5))
    assert all(capped.delay(attempt) >= timedelta(seconds=10) for attempt in range(1, 30))


def test_a_retry_floor_can_exceed_the_policy_cap(db: Database) -> None:
    inserted = enqueue(db, slot())
    claimed = claim_one(db)
    two_hours = timedelta(hours=2) / timedelta(milliseconds=1)
    assert fail(
        db,
        claimed,
        "slow down",
        retry_after_ms=two_hours,
        backoff=Backoff(cap=timedelta(minutes=1)),
    )
    assert _waited(current(db, inserted.id)) >= timedelta(hours=2)


@pytest.mark.parametrize("hint", ["soon", "nan", "inf", -5, True, [1]])
def test_malformed_provider_hints_never_block_the_failure(db: Database, hint: object) -> None:
    inserted = enqueue(db, JobBuilder("flaky", {"hint": hint}).slot(NS, SCOPE, "k1"))
    claimed = claim_one(db)
    assert record(db, [(claimed, execute(flaky, claimed))], registry=flaky)
    job = current(db, inserted.id)
    assert job.state is JobState.RETRYABLE and "provider unavailable" in job.errors[-1].error


@pytest.mark.parametrize("bad", [-1, math.inf, "2s", True])
def test_explicit_retry_after_is_validated_before_anything_is_written(
    db: Database, bad: object
) -> None:
    inserted = enqueue(db, slot())
    claimed = claim_one(db)
    with pytest.raises(InvalidArgumentError, match="retry_after_ms"):
        fail(db, claimed, "boom", retry_after_ms=bad)  # type: ignore[arg-type]
    job = current(db, inserted.id)
    assert job.state is JobState.EXECUTING and job.errors == []


def test_a_slot_out_of_attempts_parks_instead_of_being_discarded(db: Database) -> None:
    inserted = enqueue(db, slot().max_attempts(1))
    assert fail(db, claim_one(db), "permanent trouble")
    job = current(db, inserted.id)
    assert job.state is JobState.PARKED and job.attempt == 0 and job.finalized_at is None
    assert "permanent trouble" in job.errors[-1].error
    assert [r.outcome for r in runs(db, inserted.id)] == [RunOutcome.FAILED]


# --- operator reads and actions --------------------------------------------------------------


def test_list_slots_shows_identity_state_demand_and_last_run(db: Database) -> None:
    now = utcnow()
    ran = enqueue(db, slot("a"), now=now)
    enqueue(db, slot("b").schedule_in(timedelta(hours=1)), now=now)
    enqueue(db, JobBuilder("ok", {}).slot("other.ns", SCOPE, "c"), now=now)
    enqueue(db, JobBuilder("ok", {}), now=now)  # one-shot jobs are not listed
    assert complete(db, claim_one(db, now))
    wake_job(db, ran.id, control=False, now=now)
    later = now + timedelta(seconds=1)
    listed = list_slots(db, namespace=NS, now=later)
    assert [(s.key, s.state) for s in listed] == [
        ("a", JobState.AVAILABLE),
        ("b", JobState.SCHEDULED),
    ]
    a, b = listed
    assert a.job_id == ran.id and a.demand_pending and not a.control_pending and a.due
    assert a.demand_seq == 1 and a.next_due_at == now
    assert a.last_outcome is RunOutcome.COMPLETED and a.last_finished_at is not None
    assert a.last_started_at == now
    assert not b.due and b.next_due_at == now + timedelta(hours=1) and b.last_outcome is None
    assert len(list_slots(db)) == 3 and len(list_slots(db, limit=1)) == 1
    assert list_slots(db, namespace=NS, scope="nope") == []
    with pytest.raises(InvalidArgumentError, match="limit"):
        list_slots(db, limit=0)


def test_a_disabled_slot_records_wakes_and_runs_them_when_enabled(db: Database) -> None:
    inserted = enqueue(db, slot())
    assert complete(db, claim_one(db))
    disabled = disable_slot(db, inserted.id)
    assert disabled.state is JobState.DISABLED
    assert disable_slot(db, inserted.id).state is JobState.DISABLED  # idempotent
    assert wake_job(db, inserted.id).state is JobState.DISABLED
    assert claim(db, queue="default", node="n1") == []
    assert current(db, inserted.id).control_pending
    assert enable_slot(db, inserted.id).state is JobState.AVAILABLE
    assert claim_all(db) == 1
    disable_slot(db, inserted.id)
    assert enable_slot(db, inserted.id).state is JobState.PARKED  # nothing pending


def test_an_operator_parks_a_slot_and_clears_its_pending_wakes(db: Database) -> None:
    inserted = enqueue(db, slot(demand=True))
    parked = park_job(db, inserted.id)
    assert parked.state is JobState.PARKED
    assert not parked.control_pending and not parked.demand_pending
    assert park_job(db, inserted.id).state is JobState.PARKED
    assert claim(db, queue="default", node="n1") == []
    wake_job(db, inserted.id)
    claim_one(db)
    for action in (park_job, disable_slot):
        with pytest.raises(ConflictError) as raised:
            action(db, inserted.id)
        assert raised.value.details["state"] == "executing"


def test_slot_actions_refuse_other_jobs(db: Database) -> None:
    oneshot = enqueue(db, JobBuilder("ok", {}))
    off = enqueue(db, slot())
    disable_slot(db, off.id)
    with pytest.raises(ConflictError) as raised:
        park_job(db, off.id)
    assert raised.value.details["state"] == "disabled"
    for action in (park_job, disable_slot, enable_slot):
        with pytest.raises(ConflictError) as refused:
            action(db, oneshot.id)
        assert refused.value.details["kind"] == "oneshot"
        with pytest.raises(NotFoundError):
            action(db, uuid.uuid4())
        with pytest.raises(InvalidArgumentError, match="job id"):
            action(db, "nope")


# --- races between processes -------------------------------------------------------------


procs = racing.spawned_processes(4)


@pytest.mark.slow
def test_processes_enrolling_the_same_identities_end_with_one_row_each(
    db: Database, target: Target, procs: Any
) -> None:
    identities = [(NS, SCOPE, f"k{i}") for i in range(10)]
    results = procs.starmap(
        slot_procs.enroll, [(target.url, target.schema, identities, seed) for seed in range(4)]
    )
    ids: dict[tuple[str, str, str], set[str]] = {}
    fresh: dict[tuple[str, str, str], int] = {}
    for child in results:
        for identity, job_id, duplicate in child:
            ids.setdefault(identity, set()).add(job_id)
            fresh[identity] = fresh.get(identity, 0) + (not duplicate)
    assert all(len(v) == 1 for v in ids.values()) and set(ids) == set(identities)
    assert all(n == 1 for n in fresh.values())
    listed = list_slots(db, namespace=NS)
    assert len(listed) == 10
    assert all(s.state is JobState.AVAILABLE and s.control_pending for s in listed)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("how", "control_wake", "follow_ups"),
    [("plain", False, 1), ("demand_satisfied", False, 0), ("park", False, 0), ("park", True, 1)],
)
def test_demand_from_other_processes_during_a_run(
    db: Database, target: Target, procs: Any, how: str, control_wake: bool, follow_ups: int
) -> None:
    inserted = enqueue(db, slot(demand=True))
    claimed = claim_one(db)
    tasks = [(target.url, target.schema, str(inserted.id), 5, False) for _ in range(4)]
    if control_wake:
        tasks.append((target.url, target.schema, str(inserted.id), 1, True))
    assert sum(procs.starmap(slot_procs.demand, tasks)) == 20 + control_wake
    assert current(db, inserted.id).demand_seq == 20
    assert complete(db, claimed, demand_satisfied=how == "demand_satisfied", park=how == "park")
    assert claim_all(db) == follow_ups
    assert current(db, inserted.id).state is JobState.PARKED
    assert len(runs(db, inserted.id)) == 1 + follow_ups


def woken_since(db: Database, job_id: uuid.UUID, seq: int) -> bool:
    return current(db, job_id).demand_seq > seq


@pytest.mark.slow
def test_a_wake_racing_a_completion_is_never_lost(db: Database, target: Target, procs: Any) -> None:
    inserted = enqueue(db, slot(demand=True))
    for _ in range(10):
        claimed = claim_one(db)
        seq = claimed.job.demand_seq
        pending = [
            procs.apply_async(slot_procs.demand, (target.url, target.schema, str(inserted.id), 4))
            for _ in range(3)
        ]
        slot_procs.wait_for(partial(woken_since, db, inserted.id, seq), what="a wake")
        assert complete(db, claimed)
        assert sum(p.get(timeout=30) for p in pending) == 12
        job = current(db, inserted.id)
        # Every wake landed after the claim: before the completion it left a follow-up, after
        # it the wake made the parked slot due. Either way the slot must be due now.
        assert job.state is JobState.AVAILABLE and job.demand_seq == seq + 12
    assert len(runs(db, inserted.id)) == 10
