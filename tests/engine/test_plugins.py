"""The Lifeline, the Pruner and the plugin runner, on both backends."""

from __future__ import annotations

import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    Database,
    DatabaseUnavailableError,
    JobBuilder,
    JobState,
    RunOutcome,
    Unique,
    claim,
    enqueue,
    enqueue_many,
    get_job,
    record,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import list_runs
from kickside_engine.execution import execute
from kickside_engine.plugins import runner
from kickside_engine.plugins.cron import Recurring
from kickside_engine.plugins.lifeline import RescueResult, rescue_expired
from kickside_engine.plugins.pruner import prune, prune_recurring_executions
from kickside_engine.plugins.runner import PluginSet
from kickside_engine.testing import drain_jobs

from ..conftest import Target
from ..support.workers import registry

LEASE = timedelta(seconds=30)


def job(worker: str = "ok", args: dict[str, Any] | None = None) -> JobBuilder:
    return JobBuilder(worker, args or {})


def _count(db: Database, table: sa.Table, *where: sa.ColumnElement[bool]) -> int:
    with db.read() as conn:
        return int(
            conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one()
        )


# --- Lifeline -------------------------------------------------------------------------------


def test_lifeline_rescues_only_expired_leases(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    t0 = utcnow()
    short = enqueue(db, job().queue("a"), now=t0)
    long = enqueue(db, job().queue("b"), now=t0)
    (expiring,) = claim(db, queue="a", node="n1", now=t0, lease=LEASE)
    (live,) = claim(db, queue="b", node="n2", now=t0, lease=timedelta(minutes=5))
    assert (expiring.job.id, live.job.id) == (short.id, long.id)

    at_expiry = rescue_expired(db, t0 + LEASE)  # expires_at == now: not yet expired
    assert at_expiry == RescueResult()

    now = t0 + LEASE + timedelta(seconds=1)
    with caplog.at_level(logging.WARNING, logger="kickside.plugins.lifeline"):
        result = rescue_expired(db, now)
    assert result == RescueResult(rescued=1, discarded=0, job_ids=[short.id])
    assert any(
        r.name == "kickside.plugins.lifeline"
        and r.levelno == logging.WARNING
        and "rescued 1 jobs" in r.getMessage()
        for r in caplog.records
    )

    rescued = get_job(db, short.id)
    assert rescued is not None and rescued.state is JobState.AVAILABLE
    assert rescued.scheduled_at == now and rescued.updated_at == now
    assert rescued.rescue_count == 1 and rescued.attempt == 1
    assert rescued.lease_owner == "n1"
    assert rescued.lease_token is None and rescued.lease_expires_at is None
    assert rescued.errors == []
    (run,) = list_runs(db, short.id)
    assert run.outcome is RunOutcome.RESCUED and run.finished_at == now
    assert run.error == "lease expired on node n1"

    untouched = get_job(db, long.id)
    assert untouched is not None and untouched.state is JobState.EXECUTING
    assert untouched.lease_token == live.lease_token and untouched.rescue_count == 0
    (open_run,) = list_runs(db, long.id)
    assert open_run.finished_at is None and open_run.outcome is None

    assert rescue_expired(db, now) == RescueResult()  # idempotent


def test_lifeline_discards_a_job_that_expired_on_its_last_attempt(db: Database) -> None:
    t0 = utcnow()
    first = enqueue(db, job("ok", {"n": 1}).max_attempts(1).unique(Unique.args()), now=t0)
    (claimed,) = claim(db, queue="default", node="n1", now=t0, lease=LEASE)
    now = t0 + timedelta(minutes=1)
    result = rescue_expired(db, now)
    assert result == RescueResult(rescued=0, discarded=1, job_ids=[first.id])

    gone = get_job(db, first.id)
    assert gone is not None and gone.state is JobState.DISCARDED
    assert gone.discarded_at == now and gone.finalized_at == now
    assert gone.rescue_count == 1 and gone.lease_token is None and gone.unique_key is None
    assert gone.errors[-1].attempt == 1
    assert gone.errors[-1].error == "lease expired on node n1 after attempt 1"
    (run,) = list_runs(db, first.id)
    assert run.outcome is RunOutcome.RESCUED and run.lease_token == claimed.lease_token
    # The unique key was released: an identical job can be inserted again.
    again = enqueue(db, job("ok", {"n": 1}).max_attempts(1).unique(Unique.args()), now=now)
    assert not again.duplicate and again.id != first.id


def test_lifeline_never_discards_a_slot_job(db: Database) -> None:
    t0 = utcnow()
    inserted = enqueue(db, job().max_attempts(1), now=t0)
    with db.begin() as conn:  # a slot, without depending on the slot API
        conn.execute(
            sa.update(db.tables.job)
            .where(db.tables.job.c.id == inserted.id)
            .values(kind="slot", namespace="ns", scope="s", identity_key="k")
        )
    claim(db, queue="default", node="n1", now=t0, lease=LEASE)
    result = rescue_expired(db, t0 + timedelta(minutes=1))
    assert (result.rescued, result.discarded) == (1, 0)
    slot = get_job(db, inserted.id)
    assert slot is not None and slot.state is JobState.AVAILABLE and slot.rescue_count == 1
    assert slot.finalized_at is None and slot.identity_key == "k"


def test_after_a_rescue_the_old_holders_outcome_is_dropped(db: Database) -> None:
    t0 = utcnow()
    inserted = enqueue(db, job(), now=t0)
    (stale,) = claim(db, queue="default", node="n1", now=t0, lease=LEASE)
    rescue_expired(db, t0 + timedelta(minutes=1))

    assert record(db, [(stale, execute(registry, stale))], registry=registry) == set()
    current = get_job(db, inserted.id)
    assert current is not None and current.state is JobState.AVAILABLE
    assert [r.outcome for r in list_runs(db, inserted.id)] == [RunOutcome.RESCUED]

    (fresh,) = claim(db, queue="default", node="n2", now=t0 + timedelta(minutes=2))
    assert record(db, [(fresh, execute(registry, fresh))], registry=registry) == {inserted.id}
    done = get_job(db, inserted.id)
    assert done is not None and done.state is JobState.COMPLETED
    assert done.attempt == 2 and done.rescue_count == 1
    runs = list_runs(db, inserted.id)
    assert [(r.node, r.outcome) for r in runs] == [
        ("n1", RunOutcome.RESCUED),
        ("n2", RunOutcome.COMPLETED),
    ]


def test_concurrent_lifelines_rescue_each_job_exactly_once(db: Database, target: Target) -> None:
    t0 = utcnow()
    inserted = enqueue_many(db, [job("ok", {"i": i}) for i in range(60)], now=t0)
    assert len(claim(db, queue="default", node="dead", limit=100, now=t0, lease=LEASE)) == 60
    now = t0 + timedelta(minutes=1)
    handles = [target.open(), target.open()]
    start = threading.Barrier(len(handles))

    def lifeline(handle: Database) -> list[uuid.UUID]:
        start.wait(timeout=30)
        ids: list[uuid.UUID] = []
        while (result := rescue_expired(handle, now, batch=7)).job_ids:
            ids += result.job_ids
        return ids

    try:
        with ThreadPoolExecutor(len(handles)) as pool:
            found = [f.result(timeout=120) for f in [pool.submit(lifeline, h) for h in handles]]
    finally:
        for handle in handles:
            handle.dispose()
    all_ids = [i for ids in found for i in ids]
    assert sorted(all_ids) == sorted(i.id for i in inserted)  # each exactly once
    job_t, run_t = db.tables.job, db.tables.job_run
    assert _count(db, job_t, job_t.c.rescue_count == 1, job_t.c.state == "available") == 60
    assert _count(db, run_t, run_t.c.outcome == RunOutcome.RESCUED.value) == 60
    assert _count(db, run_t) == 60


# --- Pruner ---------------------------------------------------------------------------------


def _finalize(db: Database, ids: list[uuid.UUID], state: str, at: datetime) -> None:
    with db.begin() as conn:
        conn.execute(
            sa.update(db.tables.job)
            .where(db.tables.job.c.id.in_(ids))
            .values(state=state, finalized_at=at, **{f"{state}_at": at})
        )


def test_pruner_deletes_old_final_jobs_with_their_runs_and_keeps_the_rest(db: Database) -> None:
    if db.is_sqlite:
        with db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    old = [enqueue(db, job(w)).id for w in ("ok", "cancel", "discard")]
    recent = enqueue(db, job("ok", {"recent": True})).id
    drain_jobs(db, registry)
    assert _count(db, db.tables.job_run) == 4
    available = enqueue(db, job("ok", {"state": "available"})).id
    scheduled = enqueue(db, job().schedule_in(timedelta(hours=1))).id
    executing = enqueue(db, job().queue("busy")).id
    claim(db, queue="busy", node="n1")
    retryable = enqueue(db, job("fail").queue("flaky")).id
    drain_jobs(db, registry, queue="flaky")

    now = utcnow() + timedelta(days=8)
    with db.begin() as conn:  # the recent one finished a day "ago"
        conn.execute(
            sa.update(db.tables.job)
            .where(db.tables.job.c.id == recent)
            .values(finalized_at=now - timedelta(days=1))
        )
    assert prune(db, now) == 3

    for job_id in old:
        assert get_job(db, job_id) is None
        assert list_runs(db, job_id) == []
    states = {
        i: get_job(db, i).state  # type: ignore[union-attr]
        for i in (recent, available, scheduled, executing, retryable)
    }
    assert states == {
        recent: JobState.COMPLETED,
        available: JobState.AVAILABLE,
        scheduled: JobState.SCHEDULED,
        executing: JobState.EXECUTING,
        retryable: JobState.RETRYABLE,
    }
    assert len(list_runs(db, recent)) == 1
    assert prune(db, now) == 0


def test_pruner_works_in_bounded_batches(db: Database, caplog: pytest.LogCaptureFixture) -> None:
    now = utcnow()
    inserted = [i.id for i in enqueue_many(db, [job("ok", {"i": i}) for i in range(25)])]
    _finalize(db, inserted[:10], "completed", now - timedelta(days=30))
    _finalize(db, inserted[10:20], "cancelled", now - timedelta(days=9))
    _finalize(db, inserted[20:], "discarded", now - timedelta(days=7))  # exactly at the cutoff

    with caplog.at_level(logging.DEBUG, logger="kickside.plugins.pruner"):
        assert prune(db, now, batch=4, max_batches=3) == 12
    assert any(getattr(r, "count", None) == 12 for r in caplog.records)
    assert prune(db, now, batch=4, max_batches=3) == 8
    assert prune(db, now, batch=4, max_batches=3) == 0
    remaining = _count(db, db.tables.job)
    assert remaining == 5  # finalized exactly max_age ago is not older than max_age
    assert prune(db, now, max_age=timedelta(days=1)) == 5


def test_recurring_executions_older_than_the_retention_are_pruned(db: Database) -> None:
    now = utcnow()
    table = db.tables.recurring_execution
    with db.begin() as conn:
        conn.execute(
            sa.insert(table),
            [
                {"key": "cleanup", "run_at": now - timedelta(days=8)},
                {"key": "cleanup", "run_at": now - timedelta(days=7, seconds=1)},
                {"key": "cleanup", "run_at": now - timedelta(days=6)},
                {"key": "digest", "run_at": now},
            ],
        )
    assert prune_recurring_executions(db, now) == 2
    assert _count(db, table) == 2
    assert prune_recurring_executions(db, now) == 0


# --- Runner ---------------------------------------------------------------------------------


def test_a_plugin_tick_runs_every_plugin(db: Database) -> None:
    t0 = utcnow()
    due = enqueue(db, job().schedule_in(timedelta(seconds=5)), now=t0).id
    lost = enqueue(db, job().queue("other"), now=t0).id
    claim(db, queue="other", node="dead", now=t0, lease=LEASE)
    old = enqueue(db, job(), now=t0).id
    _finalize(db, [old], "completed", t0 - timedelta(days=10))
    plugins = PluginSet(schedule=[Recurring("every_minute", "* * * * *", lambda: job("ok"))])

    report = plugins.tick(db, t0 + timedelta(minutes=1))

    assert report.ok and report.errors == {}
    assert report.staged == 1 and get_job(db, due).state is JobState.AVAILABLE  # type: ignore[union-attr]
    assert report.rescue is not None and report.rescue.job_ids == [lost]
    assert report.pruned == 1 and get_job(db, old) is None
    assert report.recurring_pruned == 0
    assert report.fired is not None and [f.key for f in report.fired] == ["every_minute"]


def test_the_plugin_runner_isolates_a_failing_plugin(
    db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(db: Database, now: datetime) -> RescueResult:
        raise RuntimeError("lifeline broke talking to https://ops:hunter2-secret@db.example.com/x")

    monkeypatch.setattr(runner, "rescue_expired", broken)
    t0 = utcnow()
    due = enqueue(db, job().schedule_in(timedelta(seconds=5)), now=t0).id
    plugins = PluginSet(schedule=[Recurring("every_minute", "* * * * *", lambda: job("ok"))])

    with caplog.at_level(logging.ERROR, logger="kickside.plugins"):
        report = plugins.tick(db, t0 + timedelta(minutes=1))

    assert not report.ok and set(report.errors) == {"lifeline"}
    assert report.errors["lifeline"].startswith("RuntimeError: lifeline broke")
    assert report.rescue is None
    assert report.staged == 1 and get_job(db, due).state is JobState.AVAILABLE  # type: ignore[union-attr]
    assert report.pruned == 0 and report.fired is not None and len(report.fired) == 1
    (logged,) = [r for r in caplog.records if r.name == "kickside.plugins"]
    assert logged.levelno == logging.ERROR and "lifeline" in logged.getMessage()
    assert "hunter2-secret" not in logged.getMessage()
    assert "hunter2-secret" not in report.errors["lifeline"]


def test_a_lost_database_ends_the_plugin_tick_unlogged_for_the_caller_to_back_off(
    db: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[str] = []

    def lost(db: Database, now: datetime) -> RescueResult:
        ran.append("lifeline")
        raise DatabaseUnavailableError("cannot reach the database: connection refused")

    def pruned(*_args: Any, **_kwargs: Any) -> int:
        ran.append("pruner")
        return 0

    monkeypatch.setattr(runner, "rescue_expired", lost)
    monkeypatch.setattr(runner, "prune", pruned)
    plugins = PluginSet()

    with (
        caplog.at_level(logging.DEBUG, logger="kickside.plugins"),
        pytest.raises(DatabaseUnavailableError),
    ):
        plugins.tick(db, utcnow())

    assert ran == ["lifeline"]  # the plugins after it would not have reached it either
    assert [r for r in caplog.records if r.name.startswith("kickside.plugins")] == []
