"""Four processes on one SQLite file: two enqueue one commit at a time while two pools work.

SQLite has a single writer; every Kickside transaction that writes starts with ``BEGIN
IMMEDIATE`` and waits on the busy timeout, so contention must cost time, never an error that
reaches a user, and never a job.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kickside_engine import connect_database, migrate
from kickside_engine.control.consistency import find_inconsistencies

from ..support.execlog import overlapping, read_executions
from ..support.history import history_problems, load_history, node_loaded, state_counts
from ..support.processes import ROOT, start_worker, stop, wait_for

pytestmark = pytest.mark.slow

PER_ENQUEUER = 300
ENQUEUERS = 2
# Long enough that one pool's two executors (about 80 jobs/s) fall behind the enqueuers, so both
# pools must take work from the shared file: the contention this test is about.
JOB_MS = 20


def _enqueuer(url: str, log: Path, start_at: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.enqueuer",
            "--database-url",
            url,
            "--count",
            str(PER_ENQUEUER),
            "--log",
            str(log),
            "--start-at",
            str(start_at),
            "--ms",
            str(JOB_MS),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_enqueuers_and_pools_on_one_sqlite_file_never_see_locked_and_lose_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'kickside.sqlite3'}"
    db = connect_database(url)
    migrate.upgrade(db)
    log = tmp_path / "executions.log"
    cli = ["--database-url", url]
    pools = [
        start_worker(
            cli,
            app="tests.support.chaos_app",
            queues="default:2",
            extra=["--node", "processes"],
            log=tmp_path / "processes.out",
        ),
        start_worker(
            cli,
            app="tests.support.chaos_app",
            queues="default:2",
            extra=["--node", "threads", "--in-process"],
            log=tmp_path / "threads.out",
        ),
    ]
    try:
        wait_for(
            lambda: node_loaded(db, "processes") and node_loaded(db, "threads"), 60, "pools up"
        )
        start_at = time.time() + 2  # both enqueuers start together, once their imports are done
        enqueuers = [_enqueuer(url, log, start_at) for _ in range(ENQUEUERS)]
        outputs = [e.communicate(timeout=120) for e in enqueuers]
        total = PER_ENQUEUER * ENQUEUERS
        wait_for(lambda: state_counts(db) == {"completed": total}, 120, "every job completed")
        assert all(p.poll() is None for p in pools)
    finally:
        codes = [stop(p) for p in pools]
    for proc, (out, err) in zip(enqueuers, outputs, strict=True):
        assert (proc.returncode, out.strip(), err) == (0, str(PER_ENQUEUER), "")
    assert codes == [0, 0]
    for name in ("processes", "threads"):
        text = (tmp_path / f"{name}.out").read_text()
        assert " job.start " in text, f"pool {name} did no work"
        for bad in (" ERROR ", "locked", "OperationalError", "Traceback"):
            assert bad not in text, f"{bad.strip()!r} in the {name} pool's log"

    jobs = load_history(db)
    inconsistencies = find_inconsistencies(db)
    db.dispose()
    assert inconsistencies == []
    assert len(jobs) == total
    assert history_problems(jobs) == []
    assert all(len(job.runs) == 1 for job in jobs.values()), "a job ran more than once"
    executions = read_executions(log)
    assert len(executions) == total
    assert all(len(runs) == 1 for runs in executions.values())
    assert overlapping(executions, {}) == []
