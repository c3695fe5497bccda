"""`kickside worker` exits non-zero when its pool stops on an error; `--prune-after` sets retention.

Real `kickside worker` processes: what systemd or Kubernetes sees is the exit status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import (
    ConfigurationError,
    Database,
    JobBuilder,
    enqueue,
    get_job,
    migrate,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import list_nodes
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..conftest import Target
from ..support.processes import (
    ROOT,
    hold_write_lock,
    release_write_lock,
    start_worker,
    stop,
    wait_for,
)

pytestmark = pytest.mark.slow


#: An app that imports in the supervisor (which reads its SCHEDULE) but not in executors.
BROKEN_IN_EXECUTORS = textwrap.dedent(
    """
    import multiprocessing

    from kickside_engine import WorkerRegistry

    if multiprocessing.parent_process() is not None:
        raise RuntimeError("this app does not load in an executor")
    registry = WorkerRegistry()
    """
)


def _worker(
    target: Target,
    *extra: str,
    path: Path | None = None,
    launcher: tuple[str, ...] = ("-m", "kickside_tui.cli"),
) -> subprocess.CompletedProcess[str]:
    """Run ``kickside worker`` to its end (``launcher``: how Python starts the CLI)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *([str(path)] if path else [])])}
    return subprocess.run(
        [
            sys.executable,
            *launcher,
            *target.cli_args(),
            "worker",
            "--queues",
            "default:2",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.parametrize("mode", [[], ["--in-process"]], ids=["process", "in-process"])
def test_a_worker_whose_app_does_not_load_exits_2(
    db: Database, target: Target, mode: list[str]
) -> None:
    proc = _worker(target, "--app", "nosuch.module", *mode)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert "nosuch" in line, proc.stderr


def test_a_worker_whose_executors_cannot_load_the_app_exits_2(
    db: Database, target: Target, tmp_path: Path
) -> None:
    (tmp_path / "broken_in_executors.py").write_text(BROKEN_IN_EXECUTORS)
    proc = _worker(target, "--app", "broken_in_executors", path=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert "could not load the app 'broken_in_executors'" in line, line
    assert "does not load in an executor" in line, line


def test_an_embedded_pool_whose_executors_cannot_load_the_app_raises(db: Database) -> None:
    pool = WorkerPool(
        db, PoolConfig(queues={"default": 2}, app="nosuch.module", shutdown_grace=timedelta(1))
    )
    with pytest.raises(ConfigurationError, match=r"could not load the app 'nosuch\.module'"):
        pool.run()
    assert isinstance(pool.error, ConfigurationError)


@pytest.mark.parametrize("value", ["soon", "7x", "-1d", "1.5.2h", "0"])
def test_a_bad_prune_after_is_one_line_with_exit_2(value: str, tmp_path: Path) -> None:
    from kickside_tui.cli.main import app

    url = f"sqlite:///{tmp_path}/k.sqlite3"
    for argv, env, named in (
        (["--prune-after", value], {}, "--prune-after"),
        ([], {"KICKSIDE_PRUNE_AFTER": value}, "KICKSIDE_PRUNE_AFTER"),  # names where it came from
    ):
        result = CliRunner().invoke(
            app,
            ["--database-url", url, "worker", "--app", "tests.support.pool_app", *argv],
            env=env,
        )
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 1 and named in result.stderr, result.stderr
        assert not (tmp_path / "k.sqlite3").exists()


def _finished(db: Database, ago: timedelta) -> uuid.UUID:
    """A completed job (in a queue no pool serves) that finished ``ago``."""
    job_id = enqueue(db, JobBuilder("noop", {}).queue("archive")).id
    at = utcnow() - ago
    with db.begin() as conn:
        conn.execute(
            sa.update(db.tables.job)
            .where(db.tables.job.c.id == job_id)
            .values(state="completed", completed_at=at, finalized_at=at)
        )
    return job_id


@pytest.mark.parametrize("how", ["flag", "env"])
def test_prune_after_sets_the_pools_retention(
    db: Database, target: Target, tmp_path: Path, how: str
) -> None:
    old = _finished(db, timedelta(hours=2))
    recent = _finished(db, timedelta(minutes=30))  # both kept under the default of 7 days
    proc = start_worker(
        target.cli_args(),
        extra=["--prune-after", "1h"] if how == "flag" else [],
        env={"KICKSIDE_PRUNE_AFTER": "1h"} if how == "env" else {},
        log=tmp_path / "pool.out",
    )
    try:
        wait_for(lambda: get_job(db, old) is None, 60, "the pool to prune the 2-hour-old job")
        assert get_job(db, recent) is not None
    finally:
        assert stop(proc) == 0, (tmp_path / "pool.out").read_text()[-2000:]


#: ``kickside`` with SQLite's busy timeout shortened (the test does not wait 30 s for it).
SHORT_BUSY_TIMEOUT_CLI = (
    "import sys\n"
    "from kickside_engine.store import engines\n"
    "engines.SQLITE_BUSY_TIMEOUT_MS = 500\n"
    "from kickside_tui.cli.main import main\n"
    "sys.argv[0] = 'kickside'\n"
    "main()\n"
)


def test_a_worker_started_on_a_sqlite_file_another_process_keeps_locked_exits_5(
    tmp_path: Path,
) -> None:
    """What an operator sees when a backup or a long write holds the file as the pool starts:
    one line naming the lock, and exit 5 (database unavailable: try again), not a driver
    error with exit 1. Nothing is left half registered."""
    path = tmp_path / "k.sqlite3"
    url = f"sqlite:///{path}"
    db = Database.from_url(url, create=True)
    migrate.upgrade(db)
    holder = hold_write_lock(path)
    try:
        proc = _worker(
            Target("sqlite", url, None),
            *("--app", "bench.workloads.app"),
            launcher=("-c", SHORT_BUSY_TIMEOUT_CLI),
        )
    finally:
        release_write_lock(holder)
    assert proc.returncode == 5, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert line == (
        f"error: {url} stayed locked by another writer past the busy timeout (0.5 s): "
        "database is locked"
    ), proc.stderr
    assert list_nodes(db, utcnow()) == []
    db.dispose()
