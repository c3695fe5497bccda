"""`kickside reload` and `kickside demo` against real pools."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import list_queues
from kickside_tui.cli.main import app
from kickside_tui.demo.database import foreign_data
from kickside_tui.demo.marker import filled_by_demo
from kickside_tui.demo.workload import PAUSED

from ..conftest import Target
from ..support.processes import ROOT, start_worker, stop, wait_for

pytestmark = pytest.mark.slow
runner = CliRunner()


def _nodes(db: Database) -> list[str]:
    with db.read() as conn:
        return list(conn.execute(sa.select(db.tables.node.c.name)).scalars())


def test_reload_signals_the_local_pool_which_carries_on(
    db: Database, target: Target, tmp_path: Path
) -> None:
    proc = start_worker(target.cli_args(), log=tmp_path / "pool.out")
    try:
        wait_for(lambda: _nodes(db), 60, "the pool to register")
        result = runner.invoke(app, [*target.cli_args(), "reload"])
        assert result.exit_code == 0, result.output
        assert "asked 1 pool(s) to reload" in result.stdout
        after = enqueue(db, JobBuilder("noop", {}))
        wait_for(lambda: get_job(db, after.id).state is JobState.COMPLETED, 60, "a job")  # type: ignore[union-attr]
        assert proc.poll() is None
    finally:
        stop(proc)
    assert "upgrading executors in place" in (tmp_path / "pool.out").read_text()


def _completed(db: Database) -> int:
    job = db.tables.job
    with db.read() as conn:
        found: int = conn.execute(
            sa.select(sa.func.count()).select_from(job).where(job.c.state == "completed")
        ).scalar_one()
        return found


def test_demo_runs_a_live_workload_then_stops(
    db: Database, target: Target, tmp_path: Path
) -> None:
    err = tmp_path / "demo.err"
    with open(err, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kickside_tui.cli", *target.cli_args(), "demo", "--seed", "7"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:  # its executors start in a few seconds, or many on a busy machine: wait for work
        wait_for(lambda: proc.poll() is not None or _completed(db) >= 5, 180, "completed jobs")
    finally:
        code = stop(proc, signal.SIGINT)
    assert code == 130, err.read_text()[-2000:]  # interrupted, as documented
    assert "stopping the demo workload" in err.read_text()
    job = db.tables.job
    with db.read() as conn:
        states = dict(
            conn.execute(sa.select(job.c.state, sa.func.count()).group_by(job.c.state)).all()
        )
        kinds = set(conn.execute(sa.select(job.c.kind).distinct()).scalars())
        runs = conn.execute(sa.select(sa.func.count()).select_from(db.tables.job_run)).scalar()
    assert states.get("completed", 0) > 0 and runs
    assert kinds == {"oneshot", "slot"}
    billing = [q for q in list_queues(db, utcnow()) if q.name == PAUSED]
    assert billing and billing[0].paused
    assert _nodes(db) == []  # the demo's pool deregistered
    assert filled_by_demo(db)  # so kickside-tui shows the demo's cron entries without options
    assert foreign_data(db) == []  # everything it wrote goes by the demo's names
