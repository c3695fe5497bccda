"""Batched hand-off: a process executor handed several jobs at once runs them one after
another, and every guarantee a single job has holds for each of them.

A queue's concurrency is never exceeded; each job's deadline runs from its own start; a crash
or timeout fails only the job that ran, the jobs behind it run elsewhere exactly once; a
cancelled job that had not started never starts, without killing the executor; a cancelled job
that runs is killed, and the jobs behind it run elsewhere. The pools here are real: process
executors importing ``tests.support.pool_app``, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, JobState, RunOutcome, enqueue_many, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, cancel_job, list_runs
from kickside_engine.models import Inserted
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..conftest import Target
from ..engine.test_capacity_race import most_at_once
from ..support.processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow

APP = "tests.support.pool_app"


@contextmanager
def _pool(db: Database, **config: Any) -> Iterator[WorkerPool]:
    settings: dict[str, Any] = {
        "app": APP,
        "queues": {"default": 1},
        "process_executors": 1,
        "handoff_batch": 4,
        "run_plugins": False,
        "poll_interval": 0.2,
    }
    pool = WorkerPool(db, PoolConfig(**(settings | config)))
    pool.start()
    try:
        yield pool
    finally:
        pool.stop(30)


def _executions(log: Path) -> dict[str, list[tuple[float, float, int]]]:
    """Per job id: (start, end, executor pid) of each execution that finished."""
    runs: dict[str, list[tuple[float, float, int]]] = {}
    if log.exists():
        for line in log.read_text().splitlines():
            job_id, pid, start, end, _version = line.split()
            runs.setdefault(job_id, []).append((float(start), float(end), int(pid)))
    return runs


def _state(db: Database, job: Inserted) -> JobState:
    found = get_job(db, job.id)
    assert found is not None
    return found.state


def _in_order(*builders: JobBuilder) -> list[JobBuilder]:
    """The builders with falling priority, so that one claim takes them in this order."""
    return [b.priority(i) for i, b in enumerate(builders)]


def _done(db: Database, job: Inserted) -> bool:
    return _state(db, job) is JobState.COMPLETED


def _outcomes(db: Database, job: Inserted) -> list[RunOutcome | None]:
    return [run.outcome for run in list_runs(db, job.id)]


def test_batches_never_run_a_queue_beyond_its_concurrency(db: Database, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    jobs = [JobBuilder("sleep", {"seconds": 0.02, "log": str(log)}).queue("one") for _ in range(40)]
    jobs += [
        JobBuilder("sleep", {"seconds": 0.02, "log": str(log)}).queue("three") for _ in range(60)
    ]
    inserted = enqueue_many(db, jobs)
    with _pool(db, queues={"one": 1, "three": 3}, process_executors=4) as pool:
        wait_for(
            lambda: all(_state(db, j) is JobState.COMPLETED for j in inserted), 120, "all done"
        )
        assert pool.stats["queued_on_executor"] > 0  # jobs were handed over in batches
    executions = _executions(log)
    assert sorted(len(runs) for runs in executions.values()) == [1] * 100
    by_queue: dict[str, list[tuple[float, float]]] = {"one": [], "three": []}
    for i, job in enumerate(inserted):
        ((start, end, _pid),) = executions[str(job.id)]
        by_queue["one" if i < 40 else "three"].append((start, end))
    assert most_at_once(by_queue["one"]) == 1
    assert most_at_once(by_queue["three"]) <= 3


def test_a_crash_in_a_batch_fails_its_job_only_and_the_rest_run_once(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kickside.job")
    log = tmp_path / "runs.log"
    first, crashing, *rest = enqueue_many(
        db,
        _in_order(
            JobBuilder("noop", {"log": str(log)}),
            JobBuilder("exit", {}).max_attempts(1),
            JobBuilder("noop", {"log": str(log)}),
            JobBuilder("noop", {"log": str(log)}),
        ),
    )
    with _pool(db) as pool:
        wait_for(lambda: _state(db, crashing) is JobState.DISCARDED, 60, "the crash recorded")
        for job in [first, *rest]:
            wait_for(partial(_done, db, job), 60, "the others")
        assert pool.stats["handed_back"] == 2  # the two behind the crash never started there
    assert _outcomes(db, crashing) == [RunOutcome.CRASHED]
    for job in [first, *rest]:
        assert _outcomes(db, job) == [RunOutcome.COMPLETED]
        assert len(_executions(log)[str(job.id)]) == 1
    # One start line per job: a job handed back had not started, and is logged as it does.
    starts = [r.job_id for r in caplog.records if r.getMessage() == "job.start"]  # type: ignore[attr-defined]
    assert sorted(starts) == sorted(str(job.id) for job in [first, crashing, *rest])


def test_each_job_of_a_batch_has_its_whole_max_execution(db: Database, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    second = timedelta(seconds=1)
    slow_a, slow_b, hung, after = enqueue_many(
        db,
        _in_order(
            JobBuilder("sleep", {"seconds": 0.7, "log": str(log)}).max_execution(second),
            JobBuilder("sleep", {"seconds": 0.7, "log": str(log)}).max_execution(second),
            JobBuilder("busy_loop", {}).max_execution(second).max_attempts(1),
            JobBuilder("noop", {"log": str(log)}),
        ),
    )
    with _pool(db) as pool:
        wait_for(lambda: _state(db, hung) is JobState.DISCARDED, 60, "the timeout")
        wait_for(lambda: _state(db, after) is JobState.COMPLETED, 60, "the job behind it")
        assert pool.stats["queued_on_executor"] >= 3  # one batch: the three waited
        assert pool.stats["handed_back"] == 1  # the one behind the timeout
    # The second sleep ends 1.4 s after the batch was handed over: its second counts from
    # its own start.
    assert _outcomes(db, slow_a) == [RunOutcome.COMPLETED]
    assert _outcomes(db, slow_b) == [RunOutcome.COMPLETED]
    assert _outcomes(db, hung) == [RunOutcome.TIMEOUT]
    assert _outcomes(db, after) == [RunOutcome.COMPLETED]
    assert len(_executions(log)[str(after.id)]) == 1


def _marked_then_two(db: Database, seconds: float, mark: Path, log: Path) -> list[Inserted]:
    """One batch: a job that touches ``mark`` as it starts and sleeps ``seconds``, then two
    no-op jobs behind it; every execution that ends is logged to ``log``."""
    return enqueue_many(
        db,
        _in_order(
            JobBuilder("marked_sleep", {"seconds": seconds, "mark": str(mark), "log": str(log)}),
            JobBuilder("noop", {"log": str(log)}),
            JobBuilder("noop", {"log": str(log)}),
        ),
    )


def test_a_cancelled_job_waiting_in_a_batch_never_starts(db: Database, tmp_path: Path) -> None:
    log, mark = tmp_path / "runs.log", tmp_path / "started"
    running, cancelled, behind = _marked_then_two(db, 1.5, mark, log)
    with _pool(db) as pool:
        wait_for(mark.exists, 60, "the first job to start")
        assert pool.stats["queued_on_executor"] == 2  # the two wait behind it on its executor
        cancel_job(db, cancelled.id, actor=Actor("test", "host"), now=utcnow())
        wait_for(lambda: _state(db, behind) is JobState.COMPLETED, 60, "the job behind it")
        assert pool.stats["handed_back"] == 0
    executions = _executions(log)
    assert str(cancelled.id) not in executions
    assert _state(db, cancelled) is JobState.CANCELLED
    assert _outcomes(db, running) == [RunOutcome.COMPLETED]
    # Passed over, not killed for: the same executor ran the job before it and the one after.
    assert executions[str(running.id)][0][2] == executions[str(behind.id)][0][2]


def test_a_cancelled_job_running_in_a_batch_is_killed_and_the_rest_run_elsewhere(
    db: Database, tmp_path: Path
) -> None:
    log, mark = tmp_path / "runs.log", tmp_path / "started"
    running, *behind = _marked_then_two(db, 30, mark, log)
    with _pool(db) as pool:
        wait_for(mark.exists, 60, "the first job to start")
        cancel_job(db, running.id, actor=Actor("test", "host"), now=utcnow())
        for job in behind:
            wait_for(partial(_done, db, job), 60, "the others")
        assert pool.stats["handed_back"] == 2
    executions = _executions(log)
    assert str(running.id) not in executions  # its 30 s never ended: it was killed
    assert _state(db, running) is JobState.CANCELLED
    killed_pid = int(mark.read_text())
    for job in behind:
        ((_s, _e, pid),) = executions[str(job.id)]
        assert pid != killed_pid
        assert _outcomes(db, job) == [RunOutcome.COMPLETED]


def test_fast_jobs_are_batched_unless_prefetch_is_off(db: Database) -> None:
    done = 0
    for prefetch, batched in ((None, True), (0, False)):
        enqueue_many(db, [JobBuilder("noop", {}) for _ in range(600)])
        done += 600
        with _pool(
            db, queues={"default": 4}, process_executors=4, handoff_batch=None, prefetch=prefetch
        ) as pool:
            wait_for(partial(_all_done, db, done), 120, "the jobs done")
            assert (pool.stats["queued_on_executor"] > 0) is batched, prefetch


def _all_done(db: Database, count: int) -> bool:
    job = db.tables.job
    with db.read() as conn:
        query = sa.select(sa.func.count()).select_from(job).where(job.c.state == "completed")
        return int(conn.execute(query).scalar_one()) == count


UPGRADE_APP = """
import time
from kickside_engine import WorkerRegistry

registry = WorkerRegistry()
CODE = "{code}"

@registry.worker("versioned")
def versioned(args, job):
    with open(args["log"], "a") as fh:
        fh.write(f"{{job.id}} {{CODE}}\\n")
    time.sleep(float(args.get("seconds", 0)))
"""


def test_after_an_upgrade_the_waiting_jobs_of_a_batch_run_the_new_code(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "app" / "batch_upgrade_app.py"
    module.parent.mkdir()
    module.write_text(UPGRADE_APP.format(code="old"))
    monkeypatch.syspath_prepend(str(module.parent))  # spawned executors inherit sys.path
    log = tmp_path / "runs.log"
    slow, *waiting = enqueue_many(
        db,
        _in_order(
            JobBuilder("versioned", {"seconds": 2, "log": str(log)}),
            *(JobBuilder("versioned", {"log": str(log)}) for _ in range(3)),
        ),
    )
    with _pool(db, app="batch_upgrade_app") as pool:
        wait_for(log.exists, 60, "the slow job to start")
        assert pool.stats["queued_on_executor"] == 3
        module.write_text(UPGRADE_APP.format(code="new code"))
        pool.request_upgrade()
        for job in [slow, *waiting]:
            wait_for(partial(_done, db, job), 60, "every job")
        assert pool.stats["handed_back"] == 3
    ran = dict(line.split(" ", 1) for line in log.read_text().splitlines())
    assert ran == {str(slow.id): "old", **{str(job.id): "new code" for job in waiting}}
    (slow_run,) = list_runs(db, slow.id)
    versions = {run.code_version for job in waiting for run in list_runs(db, job.id)}
    assert len(versions) == 1 and slow_run.code_version not in versions


def test_two_pools_with_batches_and_a_kill_9_run_every_job_never_twice_at_once(
    db: Database, target: Target, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    jobs = enqueue_many(
        db, [JobBuilder("sleep", {"seconds": 0.05, "log": str(log)}) for _ in range(300)]
    )
    extra = ["--lease-seconds", "3", "--handoff-batch", "4", "--poll-interval", "0.2"]
    first = start_worker(target.cli_args(), extra=extra, log=tmp_path / "pool1.out")
    second = start_worker(target.cli_args(), extra=extra, log=tmp_path / "pool2.out")
    try:
        wait_for(lambda: len(_executions(log)) >= 60, 60, "some jobs done")
        os.killpg(first.pid, signal.SIGKILL)  # supervisor and executors, batches in flight
        first.wait(10)
        wait_for(partial(_all_done, db, len(jobs)), 120, "every job completed")
    finally:
        assert stop(second) == 0
    executions = _executions(log)
    assert set(executions) == {str(job.id) for job in jobs}
    for job_id, runs in executions.items():
        runs.sort()
        for (_s1, end, _p1), (start, _e2, _p2) in itertools.pairwise(runs):
            assert start >= end, f"job {job_id} ran twice at the same time"
