"""The database going away under running pools and the dashboard (PostgreSQL).

Two kinds of outage, neither touching the shared server itself: the server terminating a
process's connections (``pg_terminate_backend``, aimed at this test's processes only), and a
pool cut off for longer than its lease (through :class:`~tests.support.tcp_proxy.Proxy`), as a
restart or a network partition looks from the client side.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, enqueue, enqueue_many
from kickside_engine.clock import utcnow
from kickside_engine.control.consistency import find_inconsistencies
from kickside_engine.plugins.lifeline import rescue_expired
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.chrome import Banner

from ..conftest import PG_URL, Target
from ..support.execlog import overlapping, read_executions
from ..support.history import (
    INTERRUPTED,
    history_problems,
    load_history,
    node_loaded,
    overlapping_runs,
    state_counts,
)
from ..support.pg_backends import terminate_backends
from ..support.processes import start_worker, stop, wait_for
from ..support.procfs import alive
from ..support.tcp_proxy import Proxy
from ..tui.fixtures import make_app, plain, wait_until

pytestmark = pytest.mark.slow

LEASE_SECONDS = 3
OUTAGE_SECONDS = 2 * LEASE_SECONDS + 1


def _chaos_jobs(log: Path, count: int) -> list[JobBuilder]:
    return [JobBuilder("chaos", {"log": str(log), "ms": 20 + i % 60}) for i in range(count)]


def _heartbeat(db: Database, node: str) -> datetime | None:
    table = db.tables.node
    with db.read() as conn:
        found: datetime | None = conn.execute(
            sa.select(table.c.heartbeat_at).where(table.c.name == node)
        ).scalar_one_or_none()
        return found


def _pool(target: Target, node: str, out: Path) -> subprocess.Popen[bytes]:
    return start_worker(
        target.cli_args(),
        app="tests.support.chaos_app",
        queues="default:3",
        extra=["--lease-seconds", str(LEASE_SECONDS), "--node", node],
        log=out / f"{node}.out",
    )


def test_pools_ride_out_an_outage_longer_than_the_lease_and_record_nothing_twice(
    pg_target: Target, pg_db: Database, tmp_path: Path
) -> None:
    log = tmp_path / "executions.log"
    proxy = Proxy.for_url(PG_URL)
    cut_off = Target("postgresql", proxy.url(pg_target.url), pg_target.schema)
    a = _pool(cut_off, "pool-a", tmp_path)
    b = _pool(pg_target, "pool-b", tmp_path)
    try:
        wait_for(
            lambda: node_loaded(pg_db, "pool-a") and node_loaded(pg_db, "pool-b"), 60, "pools up"
        )
        enqueue_many(pg_db, _chaos_jobs(log, 400))
        wait_for(lambda: _ran_after(log, a.pid, 0), 60, "pool A at work")
        wait_for(lambda: _ran_after(log, b.pid, 0), 60, "pool B at work")
        wait_for(lambda: state_counts(pg_db).get("completed", 0) >= 80, 60, "a first batch")
        # Pool A loses the database for longer than its lease; B's connections are
        # terminated by the server twice meanwhile, and B's Lifeline rescues A's jobs.
        proxy.down()
        terminated = terminate_backends(PG_URL, [b.pid])
        time.sleep(OUTAGE_SECONDS / 2)
        terminated += terminate_backends(PG_URL, [b.pid])
        time.sleep(OUTAGE_SECONDS / 2)
        proxy.up()
        back_at = utcnow()
        restored_ns = time.monotonic_ns()
        assert terminated >= 2
        wait_for(lambda: (_heartbeat(pg_db, "pool-a") or back_at) > back_at, 60, "A reconnects")
        enqueue_many(pg_db, _chaos_jobs(log, 100))
        wait_for(lambda: _ran_after(log, a.pid, restored_ns), 60, "A carrying on")
        wait_for(lambda: state_counts(pg_db) == {"completed": 500}, 120, "every job completed")
        assert a.poll() is None and b.poll() is None
    finally:
        codes = [stop(a), stop(b)]
        proxy.close()
    assert codes == [0, 0]
    assert "database unavailable, retrying in" in (tmp_path / "pool-a.out").read_text()

    assert rescue_expired(pg_db, utcnow()).job_ids == []  # nothing left executing
    jobs = load_history(pg_db)
    assert history_problems(jobs) == []
    assert overlapping_runs(jobs) == []
    interrupted = [r for j in jobs.values() for r in j.runs if r.outcome in INTERRUPTED]
    assert interrupted, "pool A held leases when it was cut off: the Lifeline rescued them"
    assert {r.node for r in interrupted} == {"pool-a"}
    assert all(r.outcome == "rescued" for r in interrupted)
    executions = read_executions(log)
    assert set(executions) == set(jobs)
    assert overlapping(executions, {}) == []
    reruns = sum(len(runs) - 1 for runs in executions.values())
    print(f"outage: {len(interrupted)} runs rescued from pool A, {reruns} re-runs")
    for job_id, runs in executions.items():
        for extra in runs[:-1]:  # re-runs only of attempts A ran and could not record
            assert extra.ppid == a.pid, job_id
            assert jobs[job_id].runs[extra.attempt - 1].outcome == "rescued", job_id
    assert find_inconsistencies(pg_db) == []


def _ran_after(log: Path, ppid: int, after_ns: int) -> bool:
    if not log.exists():
        return False
    for line in log.read_text().splitlines():
        mark, _pid, parent, _job, _attempt, at = line.split()
        if mark == "S" and int(parent) == ppid and int(at) > after_ns:
            return True
    return False


def test_the_dashboard_rides_out_terminated_connections_and_an_outage(
    pg_target: Target, pg_db: Database
) -> None:
    enqueue_many(pg_db, [JobBuilder("noop", {}) for _ in range(5)])
    proxy = Proxy.for_url(PG_URL)
    dashboard_db = Target("postgresql", proxy.url(pg_target.url), pg_target.schema).open()
    app = make_app(dashboard_db, refresh=0.2)

    def view() -> ViewScreen:
        screen = app.screen
        assert isinstance(screen, ViewScreen)
        return screen

    def banner() -> Banner:
        return app.screen.query_one(Banner)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_until(pilot, lambda: view().loaded >= 2, "the first loads")
            # The server ends every connection of this process (the dashboard's among them).
            assert terminate_backends(PG_URL, [os.getpid()]) >= 1
            loaded = view().loaded
            await wait_until(pilot, lambda: view().loaded >= loaded + 3, "loads after it")
            assert not banner().shown
            # The database is gone for a while: a banner on every view, then recovery.
            proxy.down()
            await wait_until(pilot, lambda: banner().shown, "the outage banner")
            assert "DATABASE UNAVAILABLE" in plain(banner().render())
            await pilot.press("2")
            await wait_until(pilot, lambda: banner().shown, "the banner on the jobs view")
            await wait_until(pilot, lambda: len(app.reconnect.delays_seconds) >= 3, "three retries")
            # Backing off: each scheduled try waits longer.
            delays = list(app.reconnect.delays_seconds)
            assert all(b > 1.5 * a for a, b in itertools.pairwise(delays)), delays
            text = plain(banner().render())
            assert re.search(r"\((next retry in [\d.]+s|retrying now)\)", text), text
            proxy.up()
            loaded = view().loaded
            await wait_until(
                pilot, lambda: view().loaded >= loaded + 2 and not banner().shown, "recovery"
            )

    try:
        asyncio.run(scenario())
    finally:
        proxy.close()
        dashboard_db.dispose()


def test_a_pool_cut_off_past_its_lease_stops_the_job_before_another_runs_it(
    pg_target: Target, pg_db: Database, tmp_path: Path
) -> None:
    log = tmp_path / "executions.log"
    args = {"log": str(log), "ms": 8000, "retry_ms": 10}
    slow = enqueue_many(pg_db, [JobBuilder("chaos", args)])[0]
    proxy = Proxy.for_url(PG_URL)
    a = _pool(Target("postgresql", proxy.url(pg_target.url), pg_target.schema), "pool-a", tmp_path)
    b = None
    try:
        wait_for(lambda: log.exists(), 60, "the first attempt started")
        proxy.down()  # for longer than the lease, while the 8 s job runs
        b = _pool(pg_target, "pool-b", tmp_path)
        wait_for(lambda: len(read_executions(log)[str(slow.id)]) == 2, 60, "the re-run started")
        first = read_executions(log)[str(slow.id)][0]
        still_running = first.end_ns is None and alive(first.pid)
        assert not still_running, "attempt 1 still ran when attempt 2 started"
    finally:
        proxy.up()
        codes = [stop(a), *([stop(b)] if b is not None else [])]
        proxy.close()
    assert all(code == 0 for code in codes)
    assert find_inconsistencies(pg_db) == []


def test_a_long_lease_queue_rides_out_a_cut_that_stops_a_short_lease_job(
    pg_target: Target, pg_db: Database, tmp_path: Path
) -> None:
    """A pool with a 3 s lease, and 60 s for queue ``reports``, is cut off for 8 s while a job of
    each queue runs: it stops the short-lease job once that lease may have run out (the job is
    rescued and re-run after the outage, never twice at once), and the reports job runs on
    through the cut, completing on its first attempt."""
    log = tmp_path / "executions.log"
    args = {"log": str(log), "ms": 14_000, "retry_ms": 10}
    short = str(enqueue(pg_db, JobBuilder("chaos", args)).id)
    long = str(enqueue(pg_db, JobBuilder("chaos", args).queue("reports")).id)
    proxy = Proxy.for_url(PG_URL)
    cut_off = Target("postgresql", proxy.url(pg_target.url), pg_target.schema)
    pool = start_worker(
        cut_off.cli_args(),
        app="tests.support.chaos_app",
        queues="default:1,reports:1",
        extra=["--lease", "3s", "--queue-leases", "reports=60s", "--node", "pool-a"],
        log=tmp_path / "pool-a.out",
    )
    try:
        wait_for(lambda: set(read_executions(log)) == {short, long}, 60, "both jobs running")
        proxy.down()
        cut_at = time.monotonic()
        first = read_executions(log)[short][0]
        wait_for(lambda: not alive(first.pid), 6, "the short-lease job stopped")
        time.sleep(max(0.0, 8 - (time.monotonic() - cut_at)))
        running = read_executions(log)[long][0]
        assert running.end_ns is None and alive(running.pid), "the long-lease job was stopped"
        up_ns = time.monotonic_ns()
        proxy.up()
        wait_for(lambda: state_counts(pg_db) == {"completed": 2}, 60, "both jobs completed")
    finally:
        proxy.up()
        code = stop(pool)
        proxy.close()
    assert code == 0
    executions = read_executions(log)
    jobs = load_history(pg_db)
    assert len(executions[long]) == 1 and executions[long][0].end_ns is not None
    assert [r.outcome for r in jobs[long].runs] == ["completed"]
    stopped, rerun = executions[short]
    assert stopped.end_ns is None and rerun.start_ns > up_ns  # never two at once
    assert [r.outcome for r in jobs[short].runs] == ["rescued", "completed"]
    assert "leases not renewed in time" in (tmp_path / "pool-a.out").read_text()
    assert history_problems(jobs) == [] and overlapping_runs(jobs) == []
    assert find_inconsistencies(pg_db) == []
