"""`kickside worker` (cron), `kickside reload` and `kickside demo` against real pools."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

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


def _cron_json(target: Target) -> Any:
    result = runner.invoke(app, [*target.cli_args(), "cron", "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _cron_jobs(db: Database, key: str = "every_minute") -> list[Any]:
    """The jobs cron entry ``key`` fired (the nightly entries fire too when the test runs in
    the minute after their time: just after midnight UTC, or 02:30 in Berlin)."""
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(sa.select(job).where(job.c.meta["cron"].is_not(None))).all()
    return [row for row in rows if row.meta.get("cron") == key]


def test_worker_runs_the_apps_schedule_and_every_node_publishes_its_own(
    db: Database, target: Target, tmp_path: Path
) -> None:
    minutely = start_worker(
        target.cli_args(),
        app="tests.support.cron_app",
        extra=["--node", "cron-1"],
        log=tmp_path / "pool1.out",
    )
    nightly = start_worker(
        target.cli_args(),
        extra=["--node", "cron-2", "--schedule", "tests.support.cron_app:NIGHTLY"],
        log=tmp_path / "pool2.out",
    )
    try:
        # "* * * * *" is due at most a minute ago when the pool starts: it fires at once (and
        # again at the next minute when the test spans one).
        fired = wait_for(lambda: _cron_jobs(db), 60, "the cron entry's job")[0]
        assert fired.meta == {"cron": "every_minute"} and "cron" in fired.tags
        wait_for(lambda: get_job(db, fired.id).state is JobState.COMPLETED, 60, "the cron job")  # type: ignore[union-attr]
        doc = wait_for(
            lambda: (d := _cron_json(target))["entries"] and len(d["entries"]) == 3 and d,
            60,
            "both nodes' schedules",
        )
        assert doc["source"] == "running nodes"
        entries = {e["key"]: e for e in doc["entries"]}
        every = entries["every_minute"]
        assert every["nodes"] == ["cron-1"] and every["expression"] == "* * * * *"
        assert (every["worker"], every["queue"], every["timezone"]) == ("noop", "default", "UTC")
        # The newest run: the first, or a later one when the test spans a minute boundary.
        fired_ids = {str(job.id) for job in _cron_jobs(db)}
        assert every["last_job_id"] in fired_ids and every["next_run"].endswith("Z")
        berlin = entries["nightly_berlin"]
        assert berlin["nodes"] == ["cron-2"] and berlin["timezone"] == "Europe/Berlin"
        # Never run, unless the test started in the minute after 02:30 in Berlin.
        assert (berlin["last_run"] is None) == (_cron_jobs(db, "nightly_berlin") == [])
        assert entries["daily_report"]["expression"] == "@daily"
        assert entries["daily_report"]["queue"] == "reports"
    finally:
        assert stop(minutely) == 0
        assert stop(nightly) == 0
    assert len(_cron_jobs(db)) <= 2  # at most once a minute, whichever node: here only cron-1
    assert _cron_json(target)["entries"] == []  # both deregistered: nothing runs cron now
    assert "cron entries=1" in (tmp_path / "pool1.out").read_text()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--schedule", "tests.support.cron_app:NOT_A_SCHEDULE"],
            "tests.support.cron_app:NOT_A_SCHEDULE is not a list of Recurring entries",
        ),
        (["--schedule", "tests.support.no_such_module"], "cannot import schedule module"),
        (["--schedule", "not a module!"], "--schedule must name a module"),
        (
            ["--app", "tests.support.bad_cron_app"],
            "cron entry 'broken': invalid cron expression '61 * * * *'",
        ),
    ],
)
def test_worker_refuses_a_schedule_it_cannot_load_in_one_line(
    target: Target, options: list[str], message: str
) -> None:
    app_option = [] if "--app" in options else ["--app", "tests.support.pool_app"]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kickside_tui.cli",
            *target.cli_args(),
            "worker",
            *app_option,
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stdout == ""


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


def test_demo_runs_a_live_workload_then_stops(db: Database, target: Target, tmp_path: Path) -> None:
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
