"""``wait_for`` and its async twin end when the job ends: on PostgreSQL through a notification
from the database (one listening connection however many wait), on SQLite by reading the job;
both on a schema from before the notifications (a rolling upgrade), by reading.

The notification tests space the waiters' safety reads an hour apart: only a notification (or
the first read) ends such a wait within its timeout. On SQLite the same tests show the reads.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

import kickside_engine.waiting as waiting_rules
from kickside_engine import (
    AsyncDatabase,
    Database,
    JobBuilder,
    JobState,
    NotFoundError,
    WaitTimeoutError,
    claim,
    complete,
    connect_async_database,
    get_job,
    migrate,
    wait_for,
    wait_for_async,
)
from kickside_engine.audit import Actor
from kickside_engine.control import cancel_job, delete_job
from kickside_engine.store.final_watch import final_channel

from ..conftest import Target

ACTOR = Actor(user="tester", host="testhost")
NEVER_S = 3600.0


@pytest.fixture
def heard_only(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL, reads an hour apart, also for a waiter whose listener did not connect:
    a wait ends in time only through its notification. SQLite keeps its reads."""
    if db.is_postgresql:
        for name in ("HEARD_POLL_SECONDS", "FIRST_POLL_SECONDS", "MAX_POLL_SECONDS"):
            monkeypatch.setattr(waiting_rules, name, NEVER_S)


def _later(seconds: float, action: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _complete_one(db: Database, job_id: uuid.UUID) -> None:
    (claimed,) = claim(db, queue="default", node="settler", limit=1)
    assert claimed.job.id == job_id
    assert complete(db, claimed, result={"n": 1})


def test_a_wait_ends_when_another_connection_completes_the_job(
    db: Database, heard_only: None
) -> None:
    job_id = JobBuilder("w").insert(db).id
    settler = _later(0.3, lambda: _complete_one(db, job_id))
    result = wait_for(db, job_id, timeout=30)
    settler.join()
    assert (result.state, result.result) == (JobState.COMPLETED, {"n": 1})


def test_a_wait_ends_on_an_operators_cancel_and_on_a_delete(db: Database, heard_only: None) -> None:
    now = datetime.now(UTC)
    cancelled, deleted = JobBuilder("w").insert(db).id, JobBuilder("w").insert(db).id
    canceller = _later(0.3, lambda: cancel_job(db, cancelled, ACTOR, now))
    assert wait_for(db, cancelled, timeout=30).state is JobState.CANCELLED
    canceller.join()
    deleter = _later(0.3, lambda: delete_job(db, deleted, ACTOR, now))
    with pytest.raises(NotFoundError, match=f"no job with id {deleted}"):
        wait_for(db, deleted, timeout=30)
    deleter.join()


def test_a_postgresql_wait_reads_the_job_only_when_told(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = 0
    real = get_job

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(waiting_rules, "get_job", counting)
    job_id = JobBuilder("w").insert(db).id
    settler = _later(1.0, lambda: _complete_one(db, job_id))
    assert wait_for(db, job_id, timeout=30).state is JobState.COMPLETED
    settler.join()
    if db.is_postgresql:
        # The first read, perhaps one when the listener connects, and the one it was told to.
        assert reads <= 3
    else:
        assert 3 < reads < 30  # read at 10 ms growing to 200 ms for a second: no busy loop


def _listeners(db: Database) -> int:
    with db.read() as conn:
        return int(
            conn.execute(
                sa.text("SELECT count(*) FROM pg_stat_activity WHERE query = :q"),
                {"q": f'LISTEN "{final_channel(db)}"'},
            ).scalar_one()
        )


def test_many_waiters_share_one_listening_connection(db: Database, heard_only: None) -> None:
    if not db.is_postgresql:
        pytest.skip("SQLite waiters read the job; there is no connection to share")
    ids = [JobBuilder("w", {"i": i}).insert(db).id for i in range(20)]
    results: dict[uuid.UUID, JobState] = {}

    def wait(job_id: uuid.UUID) -> None:
        results[job_id] = wait_for(db, job_id, timeout=30).state

    threads = [threading.Thread(target=wait, args=(i,)) for i in ids]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while _listeners(db) < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)  # every waiter has flagged its job by now
    assert _listeners(db) == 1
    for claimed in claim(db, queue="default", node="settler", limit=20):
        assert complete(db, claimed)
    for thread in threads:
        thread.join(30)
    assert results == {i: JobState.COMPLETED for i in ids}


def _until_listeners(db: Database, count: int) -> int:
    """The listeners once there are ``count`` (a closed connection's backend takes a moment to
    leave ``pg_stat_activity``), or as many as there are after 5 s."""
    deadline = time.monotonic() + 5
    while (found := _listeners(db)) != count and time.monotonic() < deadline:
        time.sleep(0.02)
    return found


def test_dispose_closes_the_listening_connection_and_a_later_wait_listens_again(
    db: Database, heard_only: None
) -> None:
    if not db.is_postgresql:
        pytest.skip("SQLite waiters read the job; there is no listening connection")
    job_id = JobBuilder("w").insert(db).id
    with pytest.raises(WaitTimeoutError):
        wait_for(db, job_id, timeout=0.5)
    assert _until_listeners(db, 1) == 1  # kept for the next wait, IDLE_SECONDS long
    db.dispose()
    assert _until_listeners(db, 0) == 0  # gone with the handle's pooled connections
    settler = _later(0.3, lambda: _complete_one(db, job_id))
    # Heard, not read: reads are an hour apart.
    assert wait_for(db, job_id, timeout=30).state is JobState.COMPLETED
    settler.join()
    assert _until_listeners(db, 1) == 1


def test_a_wait_in_progress_keeps_its_listener_through_dispose_which_then_ends_with_it(
    db: Database, heard_only: None
) -> None:
    if not db.is_postgresql:
        pytest.skip("SQLite waiters read the job; there is no listening connection")
    job_id = JobBuilder("w").insert(db).id
    disposer = _later(0.5, db.dispose)  # while the wait below listens
    settler = _later(1.0, lambda: _complete_one(db, job_id))
    assert wait_for(db, job_id, timeout=30).state is JobState.COMPLETED  # still heard
    disposer.join()
    settler.join()
    assert _until_listeners(db, 0) == 0  # with its last waiter, not IDLE_SECONDS later


def test_an_old_schema_is_waited_on_by_reading(db: Database) -> None:
    migrate.downgrade(db, "0011")
    db.schema_changed()
    job_id = JobBuilder("w").insert(db).id
    settler = _later(0.3, lambda: _complete_one(db, job_id))
    assert wait_for(db, job_id, timeout=30).state is JobState.COMPLETED
    settler.join()


def test_migration_0012_adds_and_removes_the_flag_and_its_triggers(db: Database) -> None:
    def present() -> tuple[bool, int]:
        with db.read(check_schema=False) as conn:
            columns = {
                c["name"] for c in sa.inspect(conn).get_columns("kickside_job", schema=db.schema)
            }
            triggers = 0
            if db.is_postgresql:
                triggers = conn.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'kickside_job_%_notify'"
                        " AND tgrelid = CAST(:t AS regclass)"
                    ),
                    {"t": f'"{db.schema}".kickside_job' if db.schema else "kickside_job"},
                ).scalar_one()
        return "awaited" in columns, triggers

    assert present() == (True, 2 if db.is_postgresql else 0)
    migrate.downgrade(db, "0011")
    assert present() == (False, 0)
    assert migrate.upgrade(db).up_to_date
    assert present() == (True, 2 if db.is_postgresql else 0)


@pytest.fixture
def adb(db: Database, target: Target) -> AsyncDatabase:
    return connect_async_database(target.url, schema=target.schema, pooled=False)


def test_async_waits_end_on_their_notifications_and_leave_no_task(
    db: Database, adb: AsyncDatabase, heard_only: None
) -> None:
    ids = [JobBuilder("w", {"i": i}).insert(db).id for i in range(5)]

    async def main() -> list[Any]:
        waits = [asyncio.create_task(wait_for_async(adb, i, timeout=30)) for i in ids]
        await asyncio.sleep(0.3)
        await asyncio.to_thread(
            lambda: [complete(db, c) for c in claim(db, queue="default", node="s", limit=5)]
        )
        results = await asyncio.gather(*waits)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == []  # the listener ended with the last waiter
        return results

    results = asyncio.run(main())
    assert [r.job_id for r in results] == ids
    assert {r.state for r in results} == {JobState.COMPLETED}


def test_a_forked_child_listens_for_itself(db: Database, heard_only: None) -> None:
    # A parent that waited once has a listener thread; a child forked from it (a preloading
    # web server's worker) has none of its threads and must start its own.
    if not db.is_postgresql:
        pytest.skip("SQLite waiters read the job; there is no listener to inherit")
    first = JobBuilder("w").insert(db).id
    settler = _later(0.2, lambda: _complete_one(db, first))
    assert wait_for(db, first, timeout=30).state is JobState.COMPLETED
    settler.join()
    job_id = JobBuilder("w").insert(db).id
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own connections, then wait
        code = 1
        try:
            os.close(read)
            db.engine.dispose(close=False)
            os.write(write, b"w")
            began = time.monotonic()
            ended = wait_for(db, job_id, timeout=20).state
            # Only the read at the timeout would find it, 20 s on, had nothing been heard.
            code = 0 if ended is JobState.COMPLETED and time.monotonic() - began < 10 else 2
        finally:
            os._exit(code)
    os.close(write)
    assert os.read(read, 1) == b"w"
    os.close(read)
    time.sleep(0.5)  # the child has flagged the job and listens
    _complete_one(db, job_id)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_wait_leaves_the_jobs_updated_at_alone(db: Database) -> None:
    job_id = JobBuilder("w").insert(db).id
    before = get_job(db, job_id)
    assert before is not None
    time.sleep(0.05)
    with pytest.raises(WaitTimeoutError):
        wait_for(db, job_id, timeout=0.2)  # flags the job on PostgreSQL
    after = get_job(db, job_id)
    assert after is not None and after.updated_at == before.updated_at
    # Any other change still moves it, as before.
    assert claim(db, queue="default", node="n", limit=1)
    claimed = get_job(db, job_id)
    assert claimed is not None and claimed.updated_at > before.updated_at
