"""A pool whose database connections are terminated carries on, losing and doubling nothing."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, enqueue_many, migrate

from ..conftest import PG_URL, Target, require_postgres
from ..support.pg_backends import terminate_backends
from ..support.processes import start_worker, stop, wait_for

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
