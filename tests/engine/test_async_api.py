"""The async application API on both backends: inserts in the caller's async transaction, and
every async read and action against its sync twin."""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncSession

from kickside_engine import (
    AsyncDatabase,
    ConfigurationError,
    Database,
    JobBuilder,
    JobState,
    MigrationError,
    NotFoundError,
    Unique,
    WaitTimeoutError,
    cancel_job_async,
    connect_async_database,
    delete_job_async,
    disable_slot,
    disable_slot_async,
    discard_job_async,
    enable_slot,
    enable_slot_async,
    enqueue_fanout,
    enqueue_fanout_async,
    enqueue_many,
    enqueue_many_async,
    get_job,
    get_job_async,
    get_job_statuses,
    get_job_statuses_async,
    get_job_statuses_tx,
    get_job_statuses_tx_async,
    listen,
    nudge_workers,
    nudge_workers_async,
    park_job,
    park_job_async,
    purge_slot_async,
    resume_job_async,
    retry_job_async,
    wait_for,
    wait_for_async,
    wake_job,
    wake_job_async,
    wake_multi,
    wake_multi_async,
)
from kickside_engine.audit import Actor
from kickside_engine.control import cancel_job, discard_job, list_audit, retry_job
from kickside_engine.store.inserts import COPY_FROM_ROWS
from kickside_engine.store.notify import local_signal

from ..conftest import Target

pytestmark = pytest.mark.anyio

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
ACTOR = Actor(user="tester", host="testhost")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def adb(db: Database, target: Target) -> AsyncDatabase:
    """An async handle on the test's migrated database (a connection per transaction, so
    nothing outlives the test's event loop)."""
    return connect_async_database(target.url, schema=target.schema, pooled=False)


def _state(db: Database, job_id: Any) -> JobState | None:
    job = get_job(db, job_id)
    return job.state if job is not None else None


class Payloads:
    """Notifications received on the test's schema, waited for by event, never by sleeping."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, payload: str) -> None:
        with self._cond:
            self.seen.append(payload)
            self._cond.notify_all()

    def wait_for(self, payload: str, timeout: float = 10) -> list[str]:
        with self._cond:
            assert self._cond.wait_for(lambda: payload in self.seen, timeout), self.seen
            return list(self.seen)


async def test_an_insert_in_a_committed_transaction_is_there_and_wakes_the_pools(
    db: Database, adb: AsyncDatabase
) -> None:
    signal = local_signal(db)  # the pools of this process wait on it
    seen = signal.generation
    payloads = Payloads()
    subscription = listen(db, payloads) if db.is_postgresql else None
    try:
        async with adb.begin() as conn:
            inserted = (
                await JobBuilder("w", {"n": 1}).queue("q_commit").insert_async(adb, conn=conn)
            )
            # Not visible outside the transaction before it commits.
            assert _state(db, inserted.id) is None
        assert _state(db, inserted.id) is JobState.AVAILABLE
        assert signal.generation > seen
        if subscription is not None:  # the NOTIFY rode in the transaction: sent on commit
            payloads.wait_for("q_commit")
    finally:
        if subscription is not None:
            subscription.stop()


async def test_an_insert_in_a_rolled_back_transaction_leaves_no_job_and_no_notify(
    db: Database, adb: AsyncDatabase
) -> None:
    payloads = Payloads()
    subscription = listen(db, payloads) if db.is_postgresql else None
    try:
        with pytest.raises(RuntimeError, match="the request failed"):
            async with adb.begin() as conn:
                inserted = await JobBuilder("w").queue("q_rollback").insert_async(adb, conn=conn)
                raise RuntimeError("the request failed")
        assert get_job(db, inserted.id) is None
        if subscription is not None:
            # Notifications arrive in commit order: once a later nudge is seen, a NOTIFY of the
            # rolled-back insert would have been seen before it.
            nudge_workers(db)
            assert "q_rollback" not in payloads.wait_for("nudge")
    finally:
        if subscription is not None:
            subscription.stop()


async def test_an_async_session_transaction_carries_the_insert(
    db: Database, adb: AsyncDatabase
) -> None:
    async with AsyncSession(adb.engine) as session:
        async with session.begin():
            kept = await JobBuilder("w").insert_async(adb, conn=session)
        async with session.begin():
            dropped = await JobBuilder("w").insert_async(adb, conn=session)
            await session.rollback()
    assert _state(db, kept.id) is JobState.AVAILABLE
    assert get_job(db, dropped.id) is None


async def test_an_insert_on_its_own_commits(db: Database, adb: AsyncDatabase) -> None:
    inserted = await JobBuilder("w", {"a": 1}).insert_async(adb)
    job = get_job(db, inserted.id)
    assert job is not None and job.args == {"a": 1}


async def test_uniqueness_and_slot_enrolment_match_their_sync_twins(
    db: Database, adb: AsyncDatabase
) -> None:
    unique = JobBuilder("w", {"n": 1}).unique(Unique.args())
    first = await unique.insert_async(adb)
    again = await unique.insert_async(adb)
    assert (again.id, again.duplicate) == (first.id, True)
    assert unique.insert(db).id == first.id  # the sync insert sees the same rule
    slot = JobBuilder("w").slot("ns", "scope", "k", demand=True)
    enrolled = await slot.insert_async(adb, now=NOW)
    assert (await slot.insert_async(adb, now=NOW)).duplicate
    sync_slot = JobBuilder("w").slot("ns", "scope", "k2", demand=True)
    twin = sync_slot.insert(db, now=NOW)
    assert sync_slot.insert(db, now=NOW).duplicate
    a, b = get_job(db, enrolled.id), get_job(db, twin.id)
    assert a is not None and b is not None
    # updated_at may come from the database's clock (PostgreSQL's trigger on an update).
    assert _comparable(a, "identity_key", "updated_at") == _comparable(
        b, "identity_key", "updated_at"
    )


async def test_concurrent_requests_each_insert_in_their_own_transaction(
    target: Target, db: Database
) -> None:
    """Many tasks at once on one pooled handle (SQLite writers wait their turn without blocking
    the loop): every committed job is there, every rolled-back one is not."""
    adb = connect_async_database(target.url, schema=target.schema, pool_size=4)

    async def request(n: int) -> tuple[Any, bool]:
        try:
            async with adb.begin() as conn:
                job = await JobBuilder("w", {"n": n}).insert_async(adb, conn=conn)
                await asyncio.sleep(0.001)  # the request's other work, interleaved
                if n % 3 == 0:
                    raise LookupError(n)
        except LookupError:
            return job.id, False
        return job.id, True

    try:
        outcomes = await asyncio.gather(*(request(n) for n in range(30)))
    finally:
        await adb.dispose()
    kept = {job_id for job_id, committed in outcomes if committed}
    assert set(get_job_statuses(db, [job_id for job_id, _ in outcomes])) == kept
    assert len(kept) == 20


@pytest.mark.parametrize("count", [3, COPY_FROM_ROWS + 5])
async def test_bulk_inserts_match_their_sync_twins_and_roll_back_whole(
    db: Database, adb: AsyncDatabase, count: int
) -> None:
    args = [{"i": i} for i in range(count)]
    sync_many = enqueue_many(db, [JobBuilder("w", a) for a in args], now=NOW)
    async_many = await enqueue_many_async(adb, [JobBuilder("w", a) for a in args], now=NOW)
    sync_fan = enqueue_fanout(db, JobBuilder("w").tag("t"), args, now=NOW)
    async_fan = await enqueue_fanout_async(adb, JobBuilder("w").tag("t"), args, now=NOW)
    for sync_ids, async_ids in ((sync_many, async_many), (sync_fan, async_fan)):
        assert [i.state for i in sync_ids] == [i.state for i in async_ids]
        twins = [
            (get_job(db, s.id), get_job(db, a.id)) for s, a in zip(sync_ids, async_ids, strict=True)
        ]
        assert all(s is not None and a is not None for s, a in twins)
        assert [_comparable(s) for s, _ in twins] == [_comparable(a) for _, a in twins]
    with pytest.raises(RuntimeError):
        async with adb.begin() as conn:  # COPY in the caller's transaction on PostgreSQL
            gone = await enqueue_fanout_async(adb, JobBuilder("w"), args, conn=conn)
            gone += await enqueue_many_async(adb, [JobBuilder("w", a) for a in args], conn=conn)
            raise RuntimeError("rolled back")
    assert get_job_statuses(db, [i.id for i in gone]) == {}


def _comparable(job: Any, *also: str) -> dict[str, Any]:
    """A job's columns but its id (twins differ by id only) and ``also``."""
    return {k: v for k, v in vars(job).items() if k not in ("id", *also)}


async def test_reads_match_their_sync_twins(db: Database, adb: AsyncDatabase) -> None:
    ids = [i.id for i in enqueue_many(db, [JobBuilder("w", {"i": i}) for i in range(3)])]
    assert await get_job_async(adb, ids[0]) == get_job(db, ids[0])
    assert await get_job_async(adb, str(uuid.uuid4())) is None
    assert await get_job_async(adb, "not-a-uuid") is None
    wanted = [*ids, "not-a-uuid", uuid.uuid4()]
    assert await get_job_statuses_async(adb, wanted) == get_job_statuses(db, wanted)
    async with adb.begin() as conn:
        mine = await JobBuilder("w").insert_async(adb, conn=conn)
        seen = await get_job_statuses_tx_async(adb, [*ids, mine.id], conn)
        assert seen[mine.id] is JobState.AVAILABLE  # the caller's own uncommitted insert
    with db.begin() as sync_conn:
        assert seen == get_job_statuses_tx(db, [*ids, mine.id], sync_conn)


async def test_wake_job_matches_its_sync_twin(db: Database, adb: AsyncDatabase) -> None:
    later = JobBuilder("w").schedule_in(timedelta(hours=1))
    sync_id, async_id = later.insert(db, now=NOW).id, later.insert(db, now=NOW).id
    woken_at = NOW + timedelta(minutes=1)
    synced = wake_job(db, sync_id, now=woken_at)
    awaited = await wake_job_async(adb, async_id, now=woken_at)
    assert (awaited.state, awaited.woke, awaited.already_due) == (
        synced.state,
        synced.woke,
        synced.already_due,
    )
    assert _comparable(get_job(db, async_id)) == _comparable(get_job(db, sync_id))
    done = JobBuilder("w").insert(db).id
    cancel_job(db, done, ACTOR, NOW)
    with pytest.raises(Exception) as sync_error:
        wake_job(db, done)
    with pytest.raises(type(sync_error.value), match="a finished job cannot be woken"):
        await wake_job_async(adb, done)


async def test_wake_multi_matches_its_sync_twin(db: Database, adb: AsyncDatabase) -> None:
    for key in ("a", "b"):
        JobBuilder("w").slot("ns", "scope", key).insert(db, now=NOW)
    with db.begin() as conn:
        synced = wake_multi(db, [("ns", "scope", "a"), ("ns", "scope", "x")], conn=conn, now=NOW)
    async with adb.begin() as aconn:
        awaited = await wake_multi_async(
            adb, [("ns", "scope", "b"), ("ns", "scope", "x")], conn=aconn, now=NOW
        )
    assert (len(awaited.woken), awaited.missing, awaited.locked) == (
        len(synced.woken),
        synced.missing,
        synced.locked,
    )
    a, b = get_job(db, synced.woken[0]), get_job(db, awaited.woken[0])
    assert a is not None and b is not None
    assert (b.state, b.demand_pending, b.demand_seq) == (a.state, a.demand_pending, a.demand_seq)


async def test_nudge_matches_its_sync_twin(db: Database, adb: AsyncDatabase) -> None:
    assert await nudge_workers_async(adb) == nudge_workers(db) == 0  # no live pool


async def test_cancel_and_retry_match_their_sync_twins(db: Database, adb: AsyncDatabase) -> None:
    sync_id = JobBuilder("w").insert(db, now=NOW).id
    async_id = JobBuilder("w").insert(db, now=NOW).id
    for sync_action, async_action in ((cancel_job, cancel_job_async), (retry_job, retry_job_async)):
        synced = sync_action(db, sync_id, ACTOR, NOW)
        awaited = await async_action(adb, async_id, actor=ACTOR, now=NOW)
        # updated_at may come from the database's clock (PostgreSQL); the rest is ``now``'s.
        assert _comparable(awaited, "updated_at") == _comparable(synced, "updated_at")
    for job_id in (sync_id, async_id):
        entries = list_audit(db, target=str(job_id)).entries
        assert [(e.action, e.actor, e.details) for e in entries] == [
            (e.action, e.actor, e.details) for e in list_audit(db, target=str(sync_id)).entries
        ]
    with pytest.raises(NotFoundError):
        await cancel_job_async(adb, uuid.uuid4())


async def test_discard_matches_its_sync_twin(db: Database, adb: AsyncDatabase) -> None:
    sync_id = JobBuilder("w").insert(db, now=NOW).id
    async_id = JobBuilder("w").insert(db, now=NOW).id
    synced = discard_job(db, sync_id, ACTOR, NOW)
    awaited = await discard_job_async(adb, async_id, actor=ACTOR, now=NOW)
    assert awaited.state is JobState.DISCARDED
    assert _comparable(awaited, "updated_at") == _comparable(synced, "updated_at")


async def test_slot_operations_match_their_sync_twins(db: Database, adb: AsyncDatabase) -> None:
    slot = JobBuilder("w").slot("ns", "scope", "a")
    sync_id = slot.insert(db, now=NOW).id
    async_id = JobBuilder("w").slot("ns", "scope", "b").insert(db, now=NOW).id
    for sync_action, async_action in (
        (park_job, park_job_async),
        (disable_slot, disable_slot_async),
        (enable_slot, enable_slot_async),
    ):
        synced = sync_action(db, sync_id, now=NOW, actor=ACTOR)
        awaited = await async_action(adb, async_id, now=NOW, actor=ACTOR)
        assert awaited.state is synced.state
        assert _comparable(awaited, "updated_at", "identity_key") == _comparable(
            synced, "updated_at", "identity_key"
        )
    assert [e.action for e in list_audit(db, target=str(async_id)).entries] == [
        e.action for e in list_audit(db, target=str(sync_id)).entries
    ]


async def test_an_async_slot_action_in_a_rolled_back_transaction_changes_nothing(
    db: Database, adb: AsyncDatabase
) -> None:
    job_id = JobBuilder("w").slot("ns", "scope", "a").insert(db, now=NOW).id
    before = _state(db, job_id)
    with pytest.raises(RuntimeError):
        async with adb.begin() as conn:
            assert (await disable_slot_async(adb, job_id, conn=conn)).state is JobState.DISABLED
            raise RuntimeError("the caller's own failure")
    assert _state(db, job_id) is before


async def test_purge_resume_and_delete_match_their_sync_twins(
    db: Database, adb: AsyncDatabase
) -> None:
    JobBuilder("w").slot("ns", "scope", "a").insert(db, now=NOW)
    gone = await purge_slot_async(adb, namespace="ns", scope="scope", key="a", actor=ACTOR)
    assert gone.removed and not await purge_slot_async(adb, namespace="ns", scope="scope", key="a")
    job_id = JobBuilder("w").insert(db, now=NOW).id
    await cancel_job_async(adb, job_id, actor=ACTOR, now=NOW)
    resumed = await resume_job_async(adb, job_id, actor=ACTOR, now=NOW)
    assert resumed.state is JobState.AVAILABLE
    assert (await delete_job_async(adb, job_id, actor=ACTOR, now=NOW)).id == job_id
    assert get_job(db, job_id) is None
    assert [e.action for e in list_audit(db, target=str(job_id)).entries] == [
        "delete",
        "resume",
        "cancel",
    ]


async def test_a_retried_job_wakes_this_processs_pools_as_the_sync_retry_does(
    db: Database, adb: AsyncDatabase
) -> None:
    job_id = JobBuilder("w").queue("q_retry").insert(db, now=NOW).id
    await cancel_job_async(adb, job_id, actor=ACTOR, now=NOW)
    woken: list[str | None] = []
    signal = local_signal(db)
    signal.subscribe(woken.append)
    try:
        await retry_job_async(adb, job_id, actor=ACTOR, now=NOW)
    finally:
        signal.unsubscribe(woken.append)
    assert woken  # after the commit: the pools of this process look for the job now


async def test_wait_for_matches_its_sync_twin(db: Database, adb: AsyncDatabase) -> None:
    job_id = JobBuilder("w").insert(db).id
    with pytest.raises(WaitTimeoutError, match="is still available"):
        await wait_for_async(adb, job_id, timeout=0.05)
    cancel_job(db, job_id, ACTOR, NOW)
    assert await wait_for_async(adb, job_id, timeout=5) == wait_for(db, job_id, timeout=5)
    with pytest.raises(NotFoundError):
        await wait_for_async(adb, uuid.uuid4(), timeout=1)


async def test_an_unmigrated_database_is_refused(target: Target, empty_db: Database) -> None:
    adb = connect_async_database(target.url, schema=target.schema, pooled=False)
    with pytest.raises(MigrationError):
        await JobBuilder("w").insert_async(adb)


@pytest.mark.parametrize(
    ("module", "url", "extra"),
    [
        ("aiosqlite", "sqlite:///{path}", "async"),
        ("psycopg", "postgresql://app:secret@db.example/app", "postgres"),
    ],
)
def test_a_missing_async_driver_names_its_extra(
    module: str, url: str, extra: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # `import module` fails
    with pytest.raises(ConfigurationError) as refused:
        connect_async_database(url.format(path=tmp_path / "app.sqlite3"))
    message = str(refused.value)
    assert f"needs {module}, which the {extra} extra installs" in message
    assert f"pip install 'kickside[{extra}]'" in message and "secret" not in message


async def test_a_claim_on_an_async_connection_opens_the_runs_a_sync_claim_opens(
    db: Database, adb: AsyncDatabase
) -> None:
    """The run rows of a claim made on the async engine's connection (aiosqlite on SQLite,
    where the rows are built in Python) carry what the sync claim's carry: the queue time
    rounded half up to the millisecond, as both claim statements round it."""
    from kickside_engine.store.claims import claim_jobs

    due = NOW.replace(microsecond=250_000)
    # Claimed 0.499 ms and 1,499.6 ms after the job was due.
    waits = [timedelta(microseconds=499), timedelta(milliseconds=1_499, microseconds=600)]
    for wait in waits:
        for queue in ("sync", "async"):
            JobBuilder("noop", {}).queue(queue).insert(db, now=due)

            def claim_one(conn: Any, queue: str = queue, at: datetime = due + wait) -> Any:
                return claim_jobs(db, conn, queue=queue, node="n", limit=1, now=at)

            if queue == "sync":
                with db.begin() as conn:
                    assert claim_one(conn)
            else:
                assert await adb.run(claim_one)
    run = db.tables.job_run
    runs: dict[str, list[int]] = {}
    with db.read() as conn:
        for queue in ("sync", "async"):
            rows = conn.execute(
                sa.select(run.c.queue_ms).where(run.c.queue == queue).order_by(run.c.started_at)
            )
            runs[queue] = list(rows.scalars())
    assert runs == {"sync": [0, 1_500], "async": [0, 1_500]}
