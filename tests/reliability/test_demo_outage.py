"""`kickside demo` rides out a database outage as a pool does (PostgreSQL, through a proxy)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import Database
from kickside_engine.clock import utcnow

from ..conftest import PG_URL, Target
from ..support.processes import ROOT, wait_for
from ..support.tcp_proxy import Proxy

pytestmark = pytest.mark.slow

OUTAGE_SECONDS = 6


def _jobs_since(db: Database, column: str, since: datetime) -> int:
    job = db.tables.job
    with db.read() as conn:
        found: int = conn.execute(
            sa.select(sa.func.count()).select_from(job).where(job.c[column] > since)
        ).scalar_one()
        return found


def _nodes(db: Database) -> int:
    with db.read() as conn:
        found: int = conn.execute(
            sa.select(sa.func.count()).select_from(db.tables.node)
        ).scalar_one()
        return found


def test_the_demo_rides_out_a_cut_connection_and_carries_on(
    pg_target: Target, pg_db: Database, tmp_path: Path
) -> None:
    proxy = Proxy.for_url(PG_URL)
    cut_off = Target("postgresql", proxy.url(pg_target.url), pg_target.schema)
    err = tmp_path / "demo.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kickside_tui.cli", *cut_off.cli_args(), "demo", "--seed", "11"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    try:
        started = utcnow()
        wait_for(lambda: _jobs_since(pg_db, "completed_at", started) >= 20, 120, "demo at work")
        proxy.down()
        time.sleep(OUTAGE_SECONDS)
        assert proc.poll() is None, err.read_text()[-2000:]
        proxy.up()
        back = utcnow()
        wait_for(lambda: _jobs_since(pg_db, "inserted_at", back) >= 10, 120, "traffic again")
        wait_for(lambda: _jobs_since(pg_db, "completed_at", back) >= 10, 120, "work again")
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        proxy.close()
    log = err.read_text()
    assert code == 130, log[-2000:]  # interrupted, as documented
    assert "demo traffic paused: " in log and "demo traffic resumed after " in log
    assert "stopping the demo workload" in log
    assert "Traceback" not in log
    assert _nodes(pg_db) == 0  # its pool stopped cleanly and deregistered
