"""The supervised pool with real processes: crashes, timeouts, cancels, upgrades, shutdown."""

from __future__ import annotations

import itertools
import os
import signal
import textwrap
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import (
    Database,
    JobBuilder,
    JobState,
    RunOutcome,
    enqueue,
    enqueue_many,
    get_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import list_runs
from kickside_engine.plugins.lifeline import rescue_expired

from ..conftest import Target
from ..support.processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow


def _states(db: Database) -> dict[str, int]:
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(sa.select(job.c.state, sa.func.count()).group_by(job.c.state))
        return {r[0]: r[1] for r in rows}


def _node_rows(db: Database) -> list[str]:
    with db.read() as conn:
        return [r[0] for r in conn.execute(sa.select(db.tables.node.c.name))]


def _executions(log: Path) -> dict[str, list[tuple[float, float, int]]]:
    runs: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    if log.exists():
        for line in log.read_text().splitlines():
            job_id, pid, start, end, _version = line.split()
            runs[job_id].append((float(start), float(end), int(pid)))
    return runs


def test_a_pool_runs_jobs_and_deregisters_on_shutdown(
    db: Database, target: Target, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    enqueue_many(db, [JobBuilder("noop", {"log": str(log)}) for _ in range(30)])
    proc = start_worker(target.cli_args(), log=tmp_path / "pool.out")
    try:
        wait_for(lambda: _states(db).get("completed") == 30, 60, "30 completed jobs")
        wait_for(lambda: _node_rows(db), 10, "the node row")
    finally:
        assert stop(proc) == 0
    assert _node_rows(db) == []
    assert len(_executions(log)) == 30
    runs = [r for j in _executions(log) for r in _executions(log)[j]]
    assert all(pid != proc.pid for _s, _e, pid in runs)  # ran in executors, not the supervisor


def test_kill_9_mid_batch_loses_nothing_and_never_overlaps(
    db: Database, target: Target, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    enqueue_many(db, [JobBuilder("sleep", {"seconds": 0.3, "log": str(log)}) for _ in range(24)])
    first = start_worker(
        target.cli_args(), extra=["--lease-seconds", "3"], log=tmp_path / "pool1.out"
    )
    wait_for(lambda: _states(db).get("completed", 0) >= 4, 60, "some completed jobs")
    os.killpg(first.pid, signal.SIGKILL)  # the pool and its executors, as a power loss
    first.wait(10)
    assert _states(db).get("executing", 0) > 0  # leases left behind
    second = start_worker(
        target.cli_args(), extra=["--lease-seconds", "3"], log=tmp_path / "pool2.out"
    )
    try:
        wait_for(lambda: _states(db) == {"completed": 24}, 90, "every job completed")
    finally:
        stop(second)
    executions = _executions(log)
    assert len(executions) == 24
    for job_id, runs in executions.items():
        runs.sort()
        for (_s1, e1, _p1), (s2, _e2, _p2) in itertools.pairwise(runs):
            assert s2 >= e1, f"job {job_id} ran twice at the same time"
    rescued = sum(
        1 for j in executions for r in list_runs(db, j) if r.outcome is RunOutcome.RESCUED
    )
    assert rescued >= 1


def test_timeout_kills_a_busy_loop_and_exit_fails_only_its_attempt(
    db: Database, target: Target, tmp_path: Path
) -> None:
    hung = enqueue(db, JobBuilder("busy_loop", {}).max_execution(timedelta(seconds=1)))
    crashed = enqueue(db, JobBuilder("exit", {}))
    proc = start_worker(target.cli_args(), log=tmp_path / "pool.out")
    try:
        wait_for(lambda: get_job(db, hung.id).state is JobState.RETRYABLE, 60, "timeout")  # type: ignore[union-attr]
        wait_for(lambda: get_job(db, crashed.id).state is JobState.RETRYABLE, 60, "crash")  # type: ignore[union-attr]
        after = enqueue(db, JobBuilder("noop", {}))
        wait_for(lambda: get_job(db, after.id).state is JobState.COMPLETED, 30, "pool carries on")  # type: ignore[union-attr]
        assert proc.poll() is None
    finally:
        stop(proc)
    (timeout_run,) = list_runs(db, hung.id)
    assert timeout_run.outcome is RunOutcome.TIMEOUT
    assert get_job(db, hung.id).errors[0].error.startswith("timeout:")  # type: ignore[union-attr]
    (crash_run,) = list_runs(db, crashed.id)
    assert crash_run.outcome is RunOutcome.CRASHED


def test_cancel_stops_a_running_job(db: Database, target: Target, tmp_path: Path) -> None:
    from kickside_engine.control import Actor, cancel_job

    log = tmp_path / "runs.log"
    slow = enqueue(db, JobBuilder("sleep", {"seconds": 20, "log": str(log)}))
    proc = start_worker(target.cli_args(), log=tmp_path / "pool.out")
    try:
        wait_for(lambda: get_job(db, slow.id).state is JobState.EXECUTING, 60, "start")  # type: ignore[union-attr]
        time.sleep(0.3)
        cancel_job(db, slow.id, actor=Actor("test", "host"), now=utcnow())
        # The execution is stopped: the executor is replaced and its slot serves new work.
        after = enqueue(db, JobBuilder("noop", {}))
        wait_for(lambda: get_job(db, after.id).state is JobState.COMPLETED, 30, "new work")  # type: ignore[union-attr]
        time.sleep(1)
    finally:
        stop(proc)
    assert get_job(db, slow.id).state is JobState.CANCELLED  # type: ignore[union-attr]
    assert not log.exists()  # the 20 s sleep never finished
    assert list_runs(db, slow.id)[0].outcome is RunOutcome.CANCELLED


def test_shutdown_leaves_a_job_past_the_grace_to_the_lifeline(
    db: Database, target: Target, tmp_path: Path
) -> None:
    slow = enqueue(db, JobBuilder("sleep", {"seconds": 60}))
    proc = start_worker(
        target.cli_args(), extra=["--shutdown-grace", "1"], log=tmp_path / "pool.out"
    )
    wait_for(lambda: get_job(db, slow.id).state is JobState.EXECUTING, 60, "start")  # type: ignore[union-attr]
    started = time.monotonic()
    assert stop(proc) == 0
    assert time.monotonic() - started < 15
    assert _node_rows(db) == []
    # Left executing with its lease ended; the pool's own Lifeline may already have rescued it.
    assert get_job(db, slow.id).state in (JobState.EXECUTING, JobState.AVAILABLE)  # type: ignore[union-attr]
    rescue_expired(db, utcnow() + timedelta(milliseconds=10))
    assert get_job(db, slow.id).state is JobState.AVAILABLE  # type: ignore[union-attr]
    (run,) = list_runs(db, slow.id)
    assert run.outcome is RunOutcome.RESCUED


UPGRADE_APP = """
import time
from kickside_engine import WorkerRegistry

registry = WorkerRegistry()
CODE = "{code}"

@registry.worker("versioned")
def versioned(args, job):
    time.sleep(float(args.get("seconds", 0)))
"""


def test_sighup_upgrades_executors_in_place(db: Database, target: Target, tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    module = app_dir / "upgrade_app.py"
    module.write_text(textwrap.dedent(UPGRADE_APP.format(code="one")))
    slow = enqueue(db, JobBuilder("versioned", {"seconds": 4}))
    proc = start_worker(
        target.cli_args(),
        app="upgrade_app",
        queues="default:3",
        pythonpath=[str(app_dir)],
        log=tmp_path / "pool.out",
    )
    try:
        wait_for(lambda: get_job(db, slow.id).state is JobState.EXECUTING, 60, "slow start")  # type: ignore[union-attr]
        module.write_text(textwrap.dedent(UPGRADE_APP.format(code="two")))
        proc.send_signal(signal.SIGHUP)
        time.sleep(1.5)  # idle executors are replaced at once
        after = [enqueue(db, JobBuilder("versioned", {})) for _ in range(4)]
        wait_for(
            lambda: all(get_job(db, a.id).state is JobState.COMPLETED for a in after),  # type: ignore[union-attr]
            60,
            "jobs after the upgrade",
        )
        wait_for(lambda: get_job(db, slow.id).state is JobState.COMPLETED, 30, "slow finish")  # type: ignore[union-attr]
        assert proc.poll() is None
    finally:
        stop(proc)
    (slow_run,) = list_runs(db, slow.id)  # finished once, never re-run
    new_versions = {list_runs(db, a.id)[0].code_version for a in after}
    assert len(new_versions) == 1
    assert slow_run.code_version not in new_versions
    assert slow_run.outcome is RunOutcome.COMPLETED
