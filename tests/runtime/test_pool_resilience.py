"""A pool whose database goes away carries on: it backs off, reconnects, loses and doubles
nothing."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import Database, Job, JobBuilder, WorkerRegistry, enqueue_many, migrate
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..conftest import PG_URL, Target, require_postgres
from ..support.pg_backends import terminate_backends
from ..support.processes import start_worker, stop, wait_for
from ..support.retry_log import RetryLog, assert_backs_off, retry_log
from ..support.tcp_proxy import Proxy

pytestmark = pytest.mark.slow


def test_terminated_connections_are_replaced_and_every_job_runs_once(tmp_path: Path) -> None:
    require_postgres()
    schema = f"kst_{uuid.uuid4().hex[:16]}"
    target = Target("postgresql", PG_URL, schema)
    db = target.open()
    try:
        migrate.upgrade(db)
        log = tmp_path / "runs.log"
        enqueue_many(
            db, [JobBuilder("sleep", {"seconds": 0.05, "log": str(log)}) for _ in range(150)]
        )
        proc = start_worker(target.cli_args(), log=tmp_path / "pool.out")
        try:

            def done() -> int:
                return _count(db, "completed")

            wait_for(lambda: done() >= 20, 60, "a first batch")
            killed = 0
            for _ in range(3):
                db.dispose()  # ours go too; the pool's are the point
                # Only this pool's connections: other tests may share the server.
                killed += terminate_backends(PG_URL, [proc.pid])
                time.sleep(0.5)
            assert killed > 0
            wait_for(lambda: done() == 150, 120, "every job completed after the outage")
            assert proc.poll() is None, (tmp_path / "pool.out").read_text()[-2000:]
        finally:
            stop(proc)
        lines = log.read_text().splitlines()
        ids = [line.split()[0] for line in lines]
        assert len(set(ids)) == 150
        # At-least-once: a re-run happens only for an attempt whose outcome was not recorded.
        assert len(ids) - len(set(ids)) <= 30
    finally:
        db.dispose()
        admin = sa.create_engine(PG_URL)
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def _count(db: Database, state: str) -> int:
    job = db.tables.job
    with db.read() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).select_from(job).where(job.c.state == state)
            ).scalar_one()
        )


def _heartbeat(db: Database, node: str) -> Any:
    table = db.tables.node
    with db.read() as conn:
        return conn.execute(
            sa.select(table.c.heartbeat_at).where(table.c.name == node)
        ).scalar_one_or_none()


def test_a_pool_cut_off_from_its_database_backs_off_and_starts_over_once_back(
    db: Database, target: Target
) -> None:
    """Cut off (through a proxy that refuses connections), a pool retries after 0.1 s, 0.2 s,
    0.4 s... up to 5 s, waiting each delay out; back, it runs again, and the next outage starts
    the schedule over from 0.1 s."""
    if target.backend != "postgresql":
        pytest.skip("an SQLite file cannot go away behind a proxy; PostgreSQL's server can")
    registry = WorkerRegistry()

    @registry.worker("noop")
    def noop(args: dict[str, Any], job: Job) -> None:
        return None

    proxy = Proxy.for_url(PG_URL)
    pool_db = Target("postgresql", proxy.url(target.url), target.schema).open()
    pool = WorkerPool(
        pool_db,
        PoolConfig(
            queues={"default": 1},
            mode="thread",
            registry=registry,
            run_plugins=False,
            node="cut-off",
        ),
    )
    with retry_log("kickside.pool") as retries:
        pool.start()
        try:
            _cut_off_twice(db, proxy, retries)
        finally:
            proxy.up()
            pool.stop(30)
            proxy.close()
            pool_db.dispose()


def _cut_off_twice(db: Database, proxy: Proxy, retries: RetryLog) -> None:
    wait_for(lambda: _heartbeat(db, "cut-off") is not None, 30, "the pool registered")
    proxy.down()
    wait_for(lambda: len(retries.since(0)) >= 7, 30, "seven retries")
    assert_backs_off(retries.since(0)[:7])
    proxy.up()
    # Two fresh heartbeats: the step that wrote the first has then ended, and a step that ends
    # without a database error is what starts the schedule over (cutting the proxy right after
    # the first could fail that same step, which would then rightly back off further).
    for beat in ("the pool beats again", "the pool beats once more"):
        last = _heartbeat(db, "cut-off")
        wait_for(lambda last=last: _heartbeat(db, "cut-off") != last, 30, beat)
    seen = len(retries.since(0))
    proxy.down()
    wait_for(lambda: len(retries.since(seen)) >= 3, 30, "three retries")
    assert_backs_off(retries.since(seen)[:3])  # from 0.1 s again
