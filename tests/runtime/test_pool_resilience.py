"""A pool whose database goes away carries on: it backs off, reconnects, loses and doubles
nothing."""

from __future__ import annotations

import itertools
import logging
import threading
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


class RetryLog(logging.Handler):
    """The pool's "database unavailable, retrying in N s" records: (monotonic time, N)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.retries: list[tuple[float, float]] = []
        self._lock_ = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if record.name == "kickside.pool" and str(record.msg).startswith("database unavailable"):
            with self._lock_:
                self.retries.append((time.monotonic(), float(record.args[0])))  # type: ignore[index]

    def since(self, index: int) -> list[tuple[float, float]]:
        with self._lock_:
            return self.retries[index:]


def _heartbeat(db: Database, node: str) -> Any:
    table = db.tables.node
    with db.read() as conn:
        return conn.execute(
            sa.select(table.c.heartbeat_at).where(table.c.name == node)
        ).scalar_one_or_none()


def assert_backs_off(retries: list[tuple[float, float]]) -> None:
    """Each wait doubles from 0.1 s up to 5 s (less up to 20 % jitter), and really is waited."""
    for n, (_at, wait) in enumerate(retries):
        top = min(0.1 * 2**n, 5.0)
        assert 0.8 * top - 0.05 <= wait <= top + 0.05, (n, retries)  # logged to 0.1 s
    for (at, wait), (next_at, _) in itertools.pairwise(retries):
        assert next_at - at >= wait - 0.06, f"retried {next_at - at:.3f}s after saying {wait}s"


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
    retry_log = RetryLog()
    logging.getLogger("kickside.pool").addHandler(retry_log)
    pool.start()
    try:
        wait_for(lambda: _heartbeat(db, "cut-off") is not None, 30, "the pool registered")
        proxy.down()
        wait_for(lambda: len(retry_log.since(0)) >= 7, 30, "seven retries")
        first = retry_log.since(0)
        assert_backs_off(first[:7])
        proxy.up()
        back_at = _heartbeat(db, "cut-off")
        wait_for(lambda: _heartbeat(db, "cut-off") != back_at, 30, "the pool beats again")
        seen = len(retry_log.since(0))
        proxy.down()
        wait_for(lambda: len(retry_log.since(seen)) >= 3, 30, "three retries")
        assert_backs_off(retry_log.since(seen)[:3])  # from 0.1 s again
        proxy.up()
    finally:
        proxy.up()
        pool.stop(30)
        logging.getLogger("kickside.pool").removeHandler(retry_log)
        proxy.close()
        pool_db.dispose()
