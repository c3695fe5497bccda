"""``async def`` workers on async executors, with real processes, on both backends."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from kickside_engine import (
    Database,
    JobBuilder,
    JobState,
    RunOutcome,
    enqueue,
    enqueue_fanout,
    get_job,
    get_job_statuses,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import list_runs
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.plugins.lifeline import rescue_expired
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.runtime.executors import Executor

from ..conftest import Target
from ..support.async_app import registry
from ..support.processes import start_worker, stop, wait_for
from ..support.procfs import alive, process_tree

pytestmark = pytest.mark.slow

APP = "tests.support.async_app"


@contextmanager
def _pool(db: Database, **options: Any) -> Iterator[WorkerPool]:
    config: dict[str, Any] = {"queues": {"default": 60}, "app": APP, "run_plugins": False}
    pool = WorkerPool(db, PoolConfig(**{**config, **options}))
    pool.start()
    try:
        yield pool
    finally:
        pool.stop(30)


def _state(db: Database, job_id: Any) -> JobState:
    job = get_job(db, job_id)
    assert job is not None
    return job.state


def _log(path: Path) -> list[tuple[str, int, float, float]]:
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines()]
    return [(r[0], int(r[1]), float(r[2]), float(r[3])) for r in rows]


def _async_executors(pool: WorkerPool) -> list[Executor]:
    return [ex for ex in pool.executors if ex.is_async and ex.ready]


def test_registration_marks_async_workers() -> None:
    assert registry.get("async_sleep").is_async  # type: ignore[union-attr]
    assert registry.get("AsyncClassWorker").is_async  # type: ignore[union-attr]
    assert not registry.get("sync_sleep").is_async  # type: ignore[union-attr]


def test_async_executor_options_are_validated() -> None:
    base: dict[str, Any] = {"queues": {"default": 1}, "mode": "thread", "app": "x"}
    for options, message in [
        ({"async_slots": 0}, "async_slots must be from 1 to 10000, got 0"),
        ({"async_executors": -1}, "async_executors must be from 0 to 100, got -1"),
        ({"process_executors": -1}, "process_executors must be from 0 to 1000, got -1"),
        ({"process_executors": 0, "async_executors": 0}, "a pool needs an executor"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            PoolConfig(**base, **options)


def test_fifty_async_jobs_run_at_once_on_one_async_executor(db: Database, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    jobs = [
        enqueue(db, JobBuilder("async_sleep", {"seconds": 0.05, "log": str(log)}))
        for _ in range(50)
    ]
    with _pool(db, process_executors=0, async_executors=1, async_slots=50) as pool:
        wait_for(lambda: len(_log(log)) == 50, 60, "50 async jobs run")
        wait_for(lambda: all(_state(db, j.id) is JobState.COMPLETED for j in jobs), 30, "done")
        assert len(pool.executors) == 1 and pool.executors[0].is_async
    runs = _log(log)
    assert len({pid for _, pid, _, _ in runs}) == 1  # one executor process
    span = max(end for *_, end in runs) - min(start for *_, start in runs)
    assert span < 1.0, f"50 x 0.05 s took {span:.2f} s: not concurrent"


def test_one_pool_runs_sync_and_async_workers(db: Database, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    sync = enqueue(db, JobBuilder("sync_sleep", {"log": str(log)}))
    coro = enqueue(db, JobBuilder("async_sleep", {"seconds": 0, "log": str(log)}))
    klass = enqueue(db, JobBuilder("AsyncClassWorker", {"log": str(log)}))
    # async_executors left to the app: the first executor reports async workers, and the pool
    # starts one async executor for them.
    with _pool(db, process_executors=1) as pool:
        for job in (sync, coro, klass):
            wait_for(lambda j=job: _state(db, j.id) is JobState.COMPLETED, 60, "completed")
        assert [ex.is_async for ex in pool.executors] == [False, True]
        process_pid = pool.executors[0].pid
        async_pid = pool.executors[1].pid
    pids = {job_id: pid for job_id, pid, _, _ in _log(log)}
    assert pids[str(sync.id)] == process_pid
    assert pids[str(coro.id)] == pids[str(klass.id)] == async_pid


def test_a_timed_out_async_job_is_cancelled_its_finally_runs_and_it_is_retryable(
    db: Database, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    log = tmp_path / "runs.log"
    slow = enqueue(db, JobBuilder("slow_with_finally", {"marker": str(marker)}))
    other = enqueue(db, JobBuilder("async_sleep", {"seconds": 2.5, "log": str(log)}))
    with _pool(db, process_executors=0, async_executors=1) as pool:
        wait_for(lambda: _state(db, slow.id) is JobState.RETRYABLE, 30, "the timeout")
        executor = _async_executors(pool)[0]
        wait_for(lambda: _state(db, other.id) is JobState.COMPLETED, 30, "the other job")
        # The cancel stopped one task; its executor was not killed for it.
        assert _async_executors(pool) == [executor]
    assert marker.read_text().splitlines() == ["cancelled", "finally"]
    (run,) = list_runs(db, slow.id)
    assert run.outcome is RunOutcome.TIMEOUT
    assert "max execution of 1s" in (run.error or "")
    ((_, pid, _, _),) = _log(log)
    assert pid == executor.pid


def test_a_killed_async_executor_fails_only_its_jobs_and_is_replaced(
    db: Database, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    held = [
        enqueue(db, JobBuilder("async_sleep", {"seconds": 60, "log": str(log)}).max_attempts(3))
        for _ in range(3)
    ]
    sync = enqueue(db, JobBuilder("sync_sleep", {"seconds": 2, "log": str(log)}))
    with _pool(db, process_executors=1, async_executors=1) as pool:
        wait_for(lambda: all(_state(db, j.id) is JobState.EXECUTING for j in [*held, sync]), 60)
        (victim,) = _async_executors(pool)
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        for job in held:
            wait_for(lambda j=job: _state(db, j.id) is JobState.RETRYABLE, 30, "crashed")
        wait_for(lambda: len(_async_executors(pool)) == 1, 30, "a new async executor")
        assert _async_executors(pool)[0] is not victim
        after = enqueue(db, JobBuilder("async_sleep", {"seconds": 0, "log": str(log)}))
        wait_for(lambda: _state(db, after.id) is JobState.COMPLETED, 30, "the pool carries on")
        wait_for(lambda: _state(db, sync.id) is JobState.COMPLETED, 30, "the sync job")
    for job in held:
        (run,) = list_runs(db, job.id)
        assert run.outcome is RunOutcome.CRASHED
        assert "async executor process running this attempt died" in (run.error or "")


def test_sigterm_waits_for_a_running_async_job_within_the_grace(
    db: Database, target: Target, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    job = enqueue(db, JobBuilder("async_sleep", {"seconds": 2, "log": str(log)}))
    proc = start_worker(
        target.cli_args(),
        app=APP,
        queues="default:2",
        extra=["--shutdown-grace", "20"],
        log=tmp_path / "pool.out",
    )
    wait_for(lambda: _state(db, job.id) is JobState.EXECUTING, 60, "start")
    started = time.monotonic()
    assert stop(proc) == 0
    assert time.monotonic() - started < 15
    assert _state(db, job.id) is JobState.COMPLETED
    (run,) = list_runs(db, job.id)
    assert run.outcome is RunOutcome.COMPLETED
    assert len(_log(log)) == 1


def test_thread_pools_run_async_workers_on_an_event_loop_thread(db: Database) -> None:
    job = enqueue(db, JobBuilder("async_sleep", {"seconds": 0}))
    pool = WorkerPool(
        db,
        PoolConfig(queues={"default": 2}, mode="thread", registry=registry, run_plugins=False),
    )
    pool.start()
    try:
        wait_for(lambda: _state(db, job.id) is JobState.COMPLETED, 30, "completed")
        assert [ex.is_async for ex in pool.executors] == [False, False, True]
    finally:
        pool.stop(30)


def test_an_upgrade_replaces_async_executors_and_lets_running_tasks_finish(
    db: Database, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    running = enqueue(db, JobBuilder("async_sleep", {"seconds": 8, "log": str(log)}))
    with _pool(db, process_executors=1) as pool:
        wait_for(lambda: _state(db, running.id) is JobState.EXECUTING, 60, "start")
        (old,) = _async_executors(pool)
        pool.request_upgrade()
        # The new generation takes new jobs while the old executor finishes its task.
        wait_for(lambda: any(ex is not old for ex in _async_executors(pool)), 30, "a new one")
        assert old.retiring
        later = enqueue(db, JobBuilder("async_sleep", {"seconds": 0, "log": str(log)}))
        wait_for(lambda: _state(db, later.id) is JobState.COMPLETED, 30, "the later job")
        assert _state(db, running.id) is JobState.EXECUTING
        wait_for(lambda: _state(db, running.id) is JobState.COMPLETED, 30, "the running job")
        wait_for(lambda: old not in pool.executors, 30, "the old executor retired")
        assert [ex.is_async for ex in pool.executors] == [False, True]
        new_pid = _async_executors(pool)[0].pid
    pids = {job_id: pid for job_id, pid, _, _ in _log(log)}
    assert pids[str(running.id)] == old.pid
    assert pids[str(later.id)] == new_pid != old.pid


def test_an_operator_cancel_stops_a_running_async_task_only(db: Database, tmp_path: Path) -> None:
    from kickside_engine.clock import utcnow
    from kickside_engine.control import Actor, cancel_job

    marker = tmp_path / "marker"
    log = tmp_path / "runs.log"
    slow = enqueue(
        db,
        JobBuilder("slow_with_finally", {"marker": str(marker)}).max_execution(
            timedelta(minutes=5)
        ),
    )
    other = enqueue(db, JobBuilder("async_sleep", {"seconds": 3, "log": str(log)}))
    with _pool(db, process_executors=0, async_executors=1) as pool:
        wait_for(lambda: _state(db, slow.id) is JobState.EXECUTING, 60, "start")
        wait_for(lambda: _state(db, other.id) is JobState.EXECUTING, 60, "start")
        (executor,) = _async_executors(pool)
        cancel_job(db, slow.id, actor=Actor("test", "host"), now=utcnow())
        wait_for(lambda: marker.exists() and "finally" in marker.read_text(), 30, "the cancel")
        wait_for(lambda: _state(db, other.id) is JobState.COMPLETED, 30, "the other job")
        assert _async_executors(pool) == [executor]
    assert _state(db, slow.id) is JobState.CANCELLED
    assert marker.read_text().splitlines() == ["cancelled", "finally"]


def test_an_async_executor_whose_loop_is_blocked_is_killed_failing_only_its_jobs(
    db: Database, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    blocker = enqueue(db, JobBuilder("blocks_loop", {"seconds": 60}))
    with _pool(db, process_executors=0, async_executors=1) as pool:
        wait_for(lambda: _state(db, blocker.id) is JobState.EXECUTING, 60, "start")
        (stuck,) = _async_executors(pool)
        # Started on the same loop, which the blocker holds: it cannot run meanwhile.
        bystander = enqueue(db, JobBuilder("async_sleep", {"seconds": 0, "log": str(log)}))
        wait_for(lambda: _state(db, bystander.id) is JobState.EXECUTING, 30, "claimed")
        wait_for(lambda: _state(db, blocker.id) is JobState.RETRYABLE, 30, "the kill")
        wait_for(lambda: _state(db, bystander.id) is JobState.RETRYABLE, 30, "crashed")
        wait_for(lambda: any(ex is not stuck for ex in _async_executors(pool)), 30, "replaced")
    (run,) = list_runs(db, blocker.id)
    assert run.outcome is RunOutcome.TIMEOUT
    (run,) = list_runs(db, bystander.id)
    assert run.outcome is RunOutcome.CRASHED
    assert "event loop did not stop a cancelled job" in (run.error or "")


def test_async_executors_die_with_a_killed_pool_and_their_jobs_run_once_elsewhere(
    db: Database, target: Target, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    jobs = [
        enqueue(db, JobBuilder("async_sleep", {"seconds": 5, "log": str(log)})) for _ in range(10)
    ]
    # The async executor alone: twenty process executors for the app's sync worker, spawned
    # twice, took most of this test's time and are not what it is about.
    options = ["--lease-seconds", "3", "--process-executors", "0"]
    first = start_worker(
        target.cli_args(), app=APP, queues="default:20", extra=options, log=tmp_path / "1.out"
    )
    try:
        wait_for(lambda: all(_state(db, j.id) is JobState.EXECUTING for j in jobs), 60, "start")
        executors = process_tree(first.pid)[1:]
        assert executors
        os.kill(first.pid, signal.SIGKILL)  # the supervisor alone: its executors must follow
        first.wait(10)
        wait_for(lambda: not any(alive(pid) for pid in executors), 30, "the executors to exit")
    finally:
        stop(first)
    assert _log(log) == []  # no job went on running without its pool
    second = start_worker(
        target.cli_args(), app=APP, queues="default:20", extra=options, log=tmp_path / "2.out"
    )
    try:
        wait_for(lambda: all(_state(db, j.id) is JobState.COMPLETED for j in jobs), 90, "rescued")
    finally:
        stop(second)
    assert sorted(job_id for job_id, *_ in _log(log)) == sorted(str(j.id) for j in jobs)


def test_a_running_async_jobs_lease_is_renewed(db: Database, tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    job = enqueue(db, JobBuilder("async_sleep", {"seconds": 5, "log": str(log)}))
    options: dict[str, Any] = {"lease": timedelta(seconds=3), "run_plugins": True}
    with _pool(db, process_executors=0, async_executors=1, **options):
        wait_for(lambda: _state(db, job.id) is JobState.COMPLETED, 60, "completed")
    (run,) = list_runs(db, job.id)  # never rescued, though it ran past its first lease
    assert run.outcome is RunOutcome.COMPLETED
    assert len(_log(log)) == 1


def test_a_job_that_blocks_the_event_loop_is_reported_with_its_worker_and_time(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kickside.job")
    log = tmp_path / "runs.log"
    blocker = enqueue(db, JobBuilder("blocks_loop", {"seconds": 0.6}))
    polite = enqueue(db, JobBuilder("async_sleep", {"seconds": 0.6, "log": str(log)}))
    with _pool(db, process_executors=0, async_executors=1):
        for job in (blocker, polite):
            wait_for(lambda j=job: _state(db, j.id) is JobState.COMPLETED, 60, "completed")
    reports = [r for r in caplog.records if r.getMessage() == "job.blocked_loop"]
    assert [(r.worker, r.job_id) for r in reports] == [("blocks_loop", str(blocker.id))]  # type: ignore[attr-defined]
    assert 550 <= reports[0].blocked_ms < 5000  # type: ignore[attr-defined]


def test_sigterm_leaves_an_async_job_past_the_grace_to_the_lifeline(
    db: Database, target: Target, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    slow = enqueue(db, JobBuilder("async_sleep", {"seconds": 60, "log": str(marker)}))
    proc = start_worker(
        target.cli_args(),
        app=APP,
        queues="default:2",
        extra=["--shutdown-grace", "1", "--process-executors", "0"],
        log=tmp_path / "pool.out",
    )
    wait_for(lambda: _state(db, slow.id) is JobState.EXECUTING, 60, "start")
    started = time.monotonic()
    assert stop(proc) == 0
    assert time.monotonic() - started < 15
    # Its task was stopped with the executor, not finished; its lease ended for the Lifeline.
    assert not marker.exists()
    assert _state(db, slow.id) in (JobState.EXECUTING, JobState.AVAILABLE)
    rescue_expired(db, utcnow() + timedelta(milliseconds=10))
    assert _state(db, slow.id) is JobState.AVAILABLE
    (run,) = list_runs(db, slow.id)
    assert run.outcome is RunOutcome.RESCUED


def test_kill_9_with_a_thousand_async_jobs_in_flight_loses_none_and_never_overlaps_one(
    db: Database, target: Target, tmp_path: Path
) -> None:
    log = tmp_path / "runs.log"
    jobs = enqueue_fanout(
        db, JobBuilder("async_sleep", {}), [{"seconds": 0.5, "log": str(log)}] * 1000
    )
    options = ["--lease-seconds", "3", "--process-executors", "0"]
    first = start_worker(
        target.cli_args(), app=APP, queues="default:200", extra=options, log=tmp_path / "1.out"
    )
    try:
        wait_for(lambda: len(_log(log)) >= 200, 120, "some jobs to finish")
        os.kill(first.pid, signal.SIGKILL)  # mid-flight: up to 200 tasks running, more claimed
        first.wait(10)
    finally:
        stop(first)
    second = start_worker(
        target.cli_args(), app=APP, queues="default:200", extra=options, log=tmp_path / "2.out"
    )
    try:
        ids = [j.id for j in jobs]
        wait_for(lambda: _all_completed(db, ids), 180, "every job completed")
    finally:
        stop(second)
    runs: dict[str, list[tuple[float, float]]] = {}
    for job_id, _pid, start, end in _log(log):
        runs.setdefault(job_id, []).append((start, end))
    assert set(runs) == {str(j) for j in ids}  # every job ran to its end at least once
    for job_id, spans in runs.items():
        spans.sort()
        for (_, end), (start, _) in pairwise(spans):
            assert start >= end, f"job {job_id} ran twice at once: {spans}"


def _all_completed(db: Database, ids: list[Any]) -> bool:
    statuses = get_job_statuses(db, ids)
    return len(statuses) == len(ids) and all(s is JobState.COMPLETED for s in statuses.values())
