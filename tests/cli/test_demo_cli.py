"""`kickside demo` runs on a database of its own and never writes into an application's."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, enqueue, enqueue_many, get_job, migrate
from kickside_engine.clock import utcnow
from kickside_engine.config import DATABASE_URL_ENV, HOME_ENV, SCHEMA_ENV, default_sqlite_path
from kickside_engine.control import Actor, cancel_job, list_queues, pause_queue
from kickside_engine.control.capacity import set_capacity
from kickside_engine.errors import MigrationError
from kickside_engine.store.nodes import NodeBeat, heartbeat
from kickside_engine.store.settings import get_settings
from kickside_tui.cli.main import app
from kickside_tui.demo import database as demo_database
from kickside_tui.demo import marker, workload
from kickside_tui.demo.workers import EXPORTS, registry

from ..conftest import Target
from ..support.processes import ROOT, wait_for

runner = CliRunner()
OPS = Actor("ops", "app-host")


def _application_data(db: Database) -> None:
    """What an application's database holds: its jobs, a paused queue, limits and a pool."""
    now = utcnow()
    migrate.upgrade(db)
    enqueue_many(
        db, [JobBuilder("deliver_receipt", {"order": n}).queue("mailers") for n in range(3)]
    )
    enqueue(db, JobBuilder("charge_card", {"order": 7}).queue("billing"))
    pause_queue(db, "billing", OPS, now)
    set_capacity(
        db, "app.capacity", global_limit=3, per_key_limit=1, actor=OPS, now=now, create=True
    )
    heartbeat(
        db, NodeBeat("web-1:42:ab", "web-1", 42, {"mailers": 4, "billing": 2}, "v1", 0, 6, now), now
    )


def _rows(db: Database) -> dict[str, list[str]]:
    """Every row of every Kickside table, in a stable order."""
    with db.read() as conn:
        return {
            table.name: sorted(repr(tuple(row)) for row in conn.execute(sa.select(table)))
            for table in db.tables.metadata.sorted_tables
        }


def _file(target: Target) -> Path | None:
    return Path(target.url.removeprefix("sqlite:///")) if target.backend == "sqlite" else None


def _bytes(target: Target) -> dict[str, bytes]:
    """The SQLite file and its journals, byte for byte (nothing on PostgreSQL)."""
    path = _file(target)
    if path is None:
        return {}
    files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-journal")]
    return {f.name: f.read_bytes() for f in files if f.exists() and f.stat().st_size}


def _demo(
    target: Target | None, *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """`kickside demo` in its own process (its pool starts executor processes)."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kickside_tui.cli",
            *(target.cli_args() if target else []),
            "demo",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def test_the_demo_refuses_an_applications_database_and_leaves_it_untouched(
    empty_db: Database, target: Target
) -> None:
    _application_data(empty_db)
    before = _rows(empty_db)
    empty_db.dispose()  # SQLite: the journal checkpointed, the file complete
    files = _bytes(target)
    for args in (["demo", "--seconds", "1"], ["demo", "--reset"], ["demo", "--reset", "--force"]):
        result = runner.invoke(app, [*target.cli_args(), *args])
        assert result.exit_code == 2, (args, result.output)
        (line,) = result.stderr.strip().splitlines()
        verb = "reset" if "--reset" in args else "run the demo on"
        assert line.startswith(f"error: refusing to {verb} {empty_db.display_url()}"), line
        for found in (
            "4 jobs (deliver_receipt in mailers, charge_card in billing)",
            "1 queue (billing)",
            "2 settings (app.capacity)",
            "1 node (web-1:42:ab serving billing, mailers)",
        ):
            assert found in line, line
        assert result.stdout == ""
    assert _bytes(target) == files
    assert _rows(empty_db) == before


def test_an_application_that_shares_the_database_has_tables_the_demo_refuses(
    empty_db: Database, target: Target
) -> None:
    with empty_db.begin(check_schema=False) as conn:  # an application table, no Kickside ones
        qualified = f'"{target.schema}".orders' if target.schema else "orders"
        if target.schema:
            conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{target.schema}"'))
        conn.execute(sa.text(f"CREATE TABLE {qualified} (id INTEGER PRIMARY KEY)"))
    result = runner.invoke(app, [*target.cli_args(), "demo", "--seconds", "1"])
    assert result.exit_code == 2, result.output
    assert "1 table (orders)" in result.stderr
    assert migrate.current_revision(empty_db) is None  # not even migrated


def test_force_warns_loudly_and_runs_beside_the_applications_data(
    empty_db: Database, target: Target
) -> None:
    _application_data(empty_db)
    before = _rows(empty_db)
    proc = _demo(target, "--force", "--seconds", "2", "--seed", "3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "WARNING: --force: the demo writes fake jobs" in proc.stderr
    assert "deliver_receipt in mailers" in proc.stderr
    after = _rows(empty_db)
    table = empty_db.tables
    for name in (table.job.name, table.queue.name, table.setting.name):
        assert set(before[name]) <= set(after[name]), name  # the application's rows, as they were
    paused = {q.name: q.paused for q in list_queues(empty_db, utcnow())}
    assert paused["billing"] and paused[workload.PAUSED]
    assert marker.filled_by_demo(empty_db)


def _demo_data(db: Database) -> list[Any]:
    """A database the demo filled: its settings, slots and a few jobs, one cancelled by hand."""
    migrate.upgrade(db)
    workload.prepare(db)
    jobs = enqueue_many(
        db, [workload.job("demo.send_receipt", {"order_id": n, "email": "a@b.c"}) for n in range(3)]
    )
    cancel_job(db, jobs[0].id, OPS, utcnow())  # an operator acted on it from the dashboard
    return [job.id for job in jobs]


def test_reset_empties_the_demos_own_database_then_runs_afresh(
    empty_db: Database, target: Target
) -> None:
    old = _demo_data(empty_db)
    assert demo_database.foreign_data(empty_db) == []  # the demo's own, audit entries included
    proc = _demo(target, "--reset", "--seconds", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"emptied the demo's database {empty_db.display_url()}" in proc.stderr
    assert all(get_job(empty_db, job_id) is None for job_id in old)
    assert marker.filled_by_demo(empty_db)  # the fresh run marked it again
    assert demo_database.foreign_data(empty_db) == []


def test_reset_is_refused_while_a_demo_pool_runs_on_the_database(
    empty_db: Database, target: Target
) -> None:
    old = _demo_data(empty_db)
    now = utcnow()
    heartbeat(
        empty_db,
        NodeBeat("demo-host:7:cd", "demo-host", 7, dict(workload.QUEUES), None, 0, 18, now),
        now,
    )
    result = runner.invoke(app, [*target.cli_args(), "demo", "--reset"])
    assert result.exit_code == 4, result.output
    assert "a demo pool is running on it (demo-host:7:cd); stop it first" in result.stderr
    assert all(get_job(empty_db, job_id) is not None for job_id in old)


def test_by_default_the_demo_runs_on_its_own_file_not_the_configured_database(
    empty_db: Database, target: Target, tmp_path: Path
) -> None:
    """An application's environment (KICKSIDE_DATABASE_URL, KICKSIDE_HOME) is not the demo's."""
    _application_data(empty_db)
    before = _rows(empty_db)
    empty_db.dispose()
    files = _bytes(target)
    home = tmp_path / "home"
    env = {HOME_ENV: str(home), DATABASE_URL_ENV: target.url, SCHEMA_ENV: target.schema or ""}
    proc = _demo(None, "--seconds", "1", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    own = home / "kickside-demo.sqlite3"
    assert f"demo workload on sqlite:///{own}, the demo's own database" in proc.stderr
    assert "KICKSIDE_DATABASE_URL and KICKSIDE_SCHEMA are not used" in proc.stderr
    assert not (home / "kickside.sqlite3").exists()  # the applications' default file
    assert _bytes(target) == files
    assert _rows(empty_db) == before
    demo_db = Database.from_url(f"sqlite:///{own}")
    try:
        assert marker.filled_by_demo(demo_db) and demo_database.foreign_data(demo_db) == []
    finally:
        demo_db.dispose()


def test_the_demos_file_is_beside_the_default_file_and_never_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert demo_database.default_path() == tmp_path / "kickside" / "kickside-demo.sqlite3"
    assert demo_database.default_path() != default_sqlite_path()
    assert demo_database.default_url() == f"sqlite:///{tmp_path}/kickside/kickside-demo.sqlite3"


def test_every_name_the_demo_writes_says_demo(db: Database) -> None:
    owned = workload.OWNERSHIP
    assert owned.queues and all(q.startswith("demo-") for q in owned.queues)
    assert set(workload.QUEUES) == owned.queues  # its pool serves every queue it fills
    assert owned.workers and all(w.startswith("demo.") for w in owned.workers)
    assert owned.setting_namespaces == {"kickside.demo", "demo.capacity"}
    assert owned.cron_keys and all(key.startswith("demo.") for key in owned.cron_keys)
    assert EXPORTS.group.startswith("demo.") and EXPORTS.settings_namespace.startswith("demo.")
    workload.prepare(db)
    rng = random.Random(5)
    for _ in range(30):
        workload.tick(db, rng)
    job = db.tables.job.c
    with db.read() as conn:
        written = conn.execute(
            sa.select(job.queue, job.worker, job.namespace, job.capacity_group).distinct()
        ).all()
    assert {row.queue for row in written} == owned.queues - {"demo-maintenance"}  # cron's
    assert {row.worker for row in written} <= owned.workers
    assert {row.namespace for row in written} == {None, workload.SLOT_NAMESPACE}
    assert {row.capacity_group for row in written} == {None, EXPORTS.group}
    assert demo_database.foreign_data(db) == []


def test_every_demo_retry_comes_within_seconds() -> None:
    """A day of jitter meant no retry sequence to watch and retryable jobs piling up."""

    class Highest(random.Random):
        def uniform(self, a: float, b: float) -> float:
            return max(a, b)

    for spec in registry:
        for is_slot in (False, True):
            policy = spec.backoff_for(is_slot)
            delays = [policy.policy_delay(n, Highest()) for n in range(1, spec.max_attempts + 1)]
            assert delays[0] <= timedelta(seconds=10), spec.name
            assert max(delays) <= timedelta(seconds=30), (spec.name, max(delays))


def test_the_demo_marks_its_database_for_the_cron_view(db: Database) -> None:
    workload.prepare(db)
    assert marker.filled_by_demo(db)
    (mark,) = get_settings(db, marker.NAMESPACE)
    assert mark.value == {"cron": ["demo.search_index_refresh"]}


@pytest.mark.slow
def test_sigterm_stops_the_demo_cleanly(tmp_path: Path) -> None:
    """``kill <pid>`` stops the demo as Ctrl-C does: its pool waits out the grace, gives back
    the lease of any job still running, leaves the nodes table, and exits 0 (a requested stop)."""
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kickside_tui.cli", "demo", "--seed", "7"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, HOME_ENV: str(home)},
    )
    demo_db = Database.from_url(f"sqlite:///{home / 'kickside-demo.sqlite3'}")
    try:

        def running() -> bool:
            with demo_db.read() as conn:
                executing = conn.execute(
                    sa.select(sa.func.count())
                    .select_from(demo_db.tables.job)
                    .where(demo_db.tables.job.c.state == "executing")
                ).scalar_one()
                nodes = conn.execute(
                    sa.select(sa.func.count()).select_from(demo_db.tables.node)
                ).scalar_one()
            return bool(executing and nodes)

        wait_for(lambda: _quietly(running), timeout=120, what="the demo's pool to run jobs")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, stderr[-2000:]
    assert "stopping the demo workload" in stderr
    job = demo_db.tables.job
    with demo_db.read() as conn:
        assert conn.execute(sa.select(demo_db.tables.node)).all() == []
        # A job still running at the end of the grace is given back to the Lifeline: its lease
        # is ended, so no executing job holds one.
        held = conn.execute(
            sa.select(job.c.worker).where(
                job.c.state == "executing", job.c.lease_expires_at > utcnow()
            )
        ).all()
    demo_db.dispose()
    assert held == []


def _quietly(check: Any) -> bool:
    """``check()``, or False while the demo is still creating and migrating its database."""
    try:
        return bool(check())
    except (sa.exc.OperationalError, MigrationError):
        return False
