"""A lease that expires while its job still runs: the paused owner's late outcome is dropped.

A pool is frozen with SIGSTOP (a VM pause, a stop-the-world stall) while it runs a job longer
than its lease. Another pool's Lifeline rescues the job and runs it to completion; then the
first pool wakes up with an outcome in hand. The fencing on (state, owner, lease token) must
drop that outcome: the run history shows the stale run as rescued and one completed run by the
new owner.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.control import list_runs
from kickside_engine.control.consistency import find_inconsistencies

from ..conftest import Target
from ..support.execlog import read_executions
from ..support.processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow

LEASE_SECONDS = 3


def _pool(target: Target, node: str, out: Path) -> subprocess.Popen[bytes]:
    return start_worker(
        target.cli_args(),
        app="tests.support.chaos_app",
        queues="default:1",
        extra=["--lease-seconds", str(LEASE_SECONDS), "--node", node],
        log=out / f"{node}.out",
    )


def _freeze(pool: subprocess.Popen[bytes], frozen: str, target: Target) -> None:
    """SIGSTOP the pool (``frozen="pool"``: the supervisor and its executors, as a VM pause;
    ``"supervisor"``: its executor finishes and its result waits in the pipe).

    On SQLite a process frozen inside a write transaction holds the database's one write lock,
    and no other process can write until it wakes: no pool can rescue anything then, by
    SQLite's design. A stop that lands in one of the pool's short writes (a heartbeat, a lease
    renewal) is undone and tried again a moment later.
    """
    for _ in range(50):
        if frozen == "pool":
            os.killpg(pool.pid, signal.SIGSTOP)
        else:
            os.kill(pool.pid, signal.SIGSTOP)
        if target.backend != "sqlite" or not _write_locked(target):
            return
        os.killpg(pool.pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the pool held SQLite's write lock at every stop")


def _write_locked(target: Target) -> bool:
    conn = sqlite3.connect(target.url.removeprefix("sqlite:///"), timeout=0.2)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.rollback()
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        conn.close()


def _state(db: Database, job_id: object) -> JobState | None:
    job = get_job(db, job_id)  # type: ignore[arg-type]
    return job.state if job is not None else None


@pytest.mark.parametrize("frozen", ["pool", "supervisor"])
def test_a_paused_pools_late_outcome_is_never_recorded_after_a_rescue(
    db: Database, target: Target, tmp_path: Path, frozen: str
) -> None:
    log = tmp_path / "executions.log"
    # The first attempt outlives the lease and then fails: recording that failure now would
    # resurrect the completed job as retryable. The rescuer's attempt is quick.
    args = {"log": str(log), "ms": 2500, "retry_ms": 10, "fail_attempts": 1}
    slow = enqueue(db, JobBuilder("chaos", args))
    paused = _pool(target, "paused", tmp_path)
    try:
        wait_for(lambda: log.exists(), 60, "the first attempt started")
        _freeze(paused, frozen, target)
        rescuer = _pool(target, "rescuer", tmp_path)
        try:
            wait_for(lambda: _state(db, slow.id) is JobState.COMPLETED, 60, "the re-run")
        finally:
            assert stop(rescuer) == 0
        if frozen == "supervisor":
            (first, _second) = read_executions(log)[str(slow.id)]
            assert first.end_ns is not None, "the stale attempt finished: an outcome is waiting"
        os.killpg(paused.pid, signal.SIGCONT)
        # The woken pool handles what it holds, then serves new work (it is alone now).
        after = enqueue(db, JobBuilder("chaos", {"log": str(log), "ms": 0}))
        wait_for(lambda: _state(db, after.id) is JobState.COMPLETED, 60, "the woken pool")
    finally:
        os.killpg(paused.pid, signal.SIGCONT)
        code = stop(paused)
    assert code == 0
    if frozen == "supervisor":  # the late failure reached the supervisor, which tried
        late = f"job.exception job_id={slow.id} worker=chaos queue=default attempt=1"
        assert late in (tmp_path / "paused.out").read_text()

    job = get_job(db, slow.id)
    assert job is not None and job.state is JobState.COMPLETED
    assert (job.attempt, job.rescue_count, job.errors) == (2, 1, [])
    runs = list_runs(db, slow.id)
    assert [(r.attempt, r.node, r.outcome.value if r.outcome else None) for r in runs] == [
        (1, "paused", "rescued"),
        (2, "rescuer", "completed"),
    ]
    assert "lease expired on node paused" in (runs[0].error or "")
    executions = read_executions(log)[str(slow.id)]
    assert [e.attempt for e in executions] == [1, 2]
    assert executions[0].ppid == paused.pid
    assert get_job(db, after.id).attempt == 1  # type: ignore[union-attr]
    assert find_inconsistencies(db) == []
