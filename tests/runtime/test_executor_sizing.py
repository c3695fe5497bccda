"""How many executors of each kind a pool starts when the counts are left to it: they follow
the app's workers, so that ``kickside worker --queues io:200`` for an app of ``async def``
workers runs one event loop with 200 slots, not 200 processes, and a queue that only
``async def`` workers declare adds no process of its own for an app with both kinds. Real
processes, both backends."""

from __future__ import annotations

import shutil
import time
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.backoff import Backoff
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.runtime.app import WorkerInfo
from kickside_engine.runtime.executor_kinds import executors_to_add

from ..conftest import Target
from ..support.processes import start_worker, stop, wait_for
from ..support.procfs import process_tree

pytestmark = pytest.mark.slow


def _completed(db: Database, job_id: Any) -> bool:
    job = get_job(db, job_id)
    return job is not None and job.state is JobState.COMPLETED


def test_an_async_only_app_gets_one_event_loop_sized_by_the_queues(db: Database) -> None:
    jobs = [enqueue(db, JobBuilder("io_wait", {"seconds": 0.1}, queue="io")) for _ in range(20)]
    pool = WorkerPool(
        db, PoolConfig(queues={"io": 200}, app="tests.support.async_only_app", run_plugins=False)
    )
    pool.start()
    try:
        wait_for(lambda: all(_completed(db, j.id) for j in jobs), 60, "the jobs completed")
        assert [(ex.is_async, ex.slots) for ex in pool.executors] == [(True, 200)]
    finally:
        pool.stop(30)


def test_a_mixed_app_gets_process_executors_and_one_async_executor(db: Database) -> None:
    pool = WorkerPool(
        db, PoolConfig(queues={"default": 3}, app="tests.support.async_app", run_plugins=False)
    )
    pool.start()
    try:
        wait_for(lambda: all(ex.ready for ex in pool.executors), 60, "executors ready")
        assert sorted((ex.is_async, ex.slots) for ex in pool.executors) == [
            (False, 1),
            (False, 1),
            (False, 1),
            (True, 3),
        ]
    finally:
        pool.stop(30)


def _kinds(pool: WorkerPool) -> list[tuple[bool, int]]:
    return sorted((ex.is_async, ex.slots) for ex in pool.executors)


def test_a_queue_only_async_workers_declare_adds_no_process_executor(db: Database) -> None:
    crunch = enqueue(db, JobBuilder("crunch", {"n": 5}))
    fetch = enqueue(db, JobBuilder("fetch", {"seconds": 0.05}, queue="io"))
    pool = WorkerPool(
        db,
        PoolConfig(
            queues={"default": 2, "io": 50}, app="tests.support.mixed_queues_app", run_plugins=False
        ),
    )
    pool.start()
    try:
        wait_for(lambda: _completed(db, crunch.id) and _completed(db, fetch.id), 60, "both ran")
        wait_for(lambda: all(ex.ready for ex in pool.executors), 60, "executors ready")
        # Two processes for default's sync jobs, not 52; the event loop has every queue's slots.
        assert _kinds(pool) == [(False, 1), (False, 1), (True, 52)]
    finally:
        pool.stop(30)


def test_a_pool_of_async_only_queues_leaves_a_sync_job_sent_there_to_other_pools(
    db: Database,
) -> None:
    stray = enqueue(db, JobBuilder("crunch", {"n": 5}, queue="io"))
    fetch = enqueue(db, JobBuilder("fetch", {"seconds": 0}, queue="io"))
    pool = WorkerPool(
        db, PoolConfig(queues={"io": 50}, app="tests.support.mixed_queues_app", run_plugins=False)
    )
    pool.start()
    try:
        wait_for(lambda: _completed(db, fetch.id), 60, "the async job ran")
        # Once its executor reported the app's workers (sync ones too), the pool still starts
        # no process executor for them, and does not claim the sync job it cannot run.
        time.sleep(1.0)
        assert _kinds(pool) == [(True, 50)]
        left = get_job(db, stray.id)
        assert left is not None and left.state is JobState.AVAILABLE and left.attempt == 0
    finally:
        pool.stop(30)
    # A pool that runs sync jobs takes it.
    other = WorkerPool(
        db,
        PoolConfig(
            queues={"io": 1},
            app="tests.support.mixed_queues_app",
            run_plugins=False,
            process_executors=1,
        ),
    )
    other.start()
    try:
        wait_for(lambda: _completed(db, stray.id), 60, "the sync job ran on a pool with a process")
    finally:
        other.stop(30)


_INFOS = {
    "crunch": WorkerInfo(timedelta(minutes=5), Backoff(), None, is_async=False, queue="default"),
    "fetch": WorkerInfo(timedelta(minutes=5), Backoff(), None, is_async=True, queue="io"),
}


@pytest.mark.parametrize(
    ("queues", "options", "added"),
    [
        ({"default": 2, "io": 50}, {}, [False, False]),  # default's sync jobs only
        ({"io": 50}, {}, []),  # a queue only async workers declare
        ({"mailers": 3}, {}, [False, False, False]),  # undeclared: sync jobs may be routed there
        ({"default": 2, "io": 50}, {"process_executors": 1}, []),  # counted by the operator
    ],
)
def test_new_code_that_brings_sync_workers_gets_process_executors_for_their_queues(
    queues: dict[str, int], options: dict[str, Any], added: list[bool]
) -> None:
    """An async-only pool whose executor reports sync workers (an upgrade, or an app the
    supervisor could not import) sizes their processes by the same rule as at start."""
    config = PoolConfig(queues=queues, mode="thread", app="x", **options)
    running = [SimpleNamespace(is_async=True)]
    assert executors_to_add(config, running, _INFOS, {"fetch"}) == added  # type: ignore[arg-type]


def test_kickside_worker_queues_io_200_starts_one_executor_process(
    db: Database, target: Target
) -> None:
    job = enqueue(db, JobBuilder("io_wait", {"seconds": 0}, queue="io"))
    worker = start_worker(target.cli_args(), app="tests.support.async_only_app", queues="io:200")
    try:
        wait_for(lambda: _completed(db, job.id), 60, "the job ran")
        # The supervisor and one async executor (plus multiprocessing's resource tracker, if
        # it started one): nowhere near 200 processes.
        assert len(process_tree(worker.pid)) <= 3
    finally:
        stop(worker)


def test_kickside_worker_for_a_mixed_app_starts_processes_for_its_sync_queues_only(
    db: Database, target: Target
) -> None:
    fetch = enqueue(db, JobBuilder("fetch", {"seconds": 0}, queue="io"))
    crunch = enqueue(db, JobBuilder("crunch", {"n": 5}))
    worker = start_worker(
        target.cli_args(), app="tests.support.mixed_queues_app", queues="default:2,io:200"
    )
    try:
        wait_for(lambda: _completed(db, fetch.id) and _completed(db, crunch.id), 60, "both ran")
        # The supervisor, two process executors, one async executor (and multiprocessing's
        # resource tracker, if it started one): not 202 processes.
        assert len(process_tree(worker.pid)) <= 5
    finally:
        stop(worker)


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
@pytest.mark.parametrize(("queues", "warned"), [("default:17", True), ("default:2", False)])
def test_a_pool_starting_more_processes_than_its_cpus_run_well_says_so(
    db: Database, target: Target, tmp_path: Path, queues: str, warned: bool
) -> None:
    """Pinned to one CPU, 17 process executors are more than 16 a CPU: the operator is told,
    with the counts and what to do instead; 2 are not."""
    log = tmp_path / "worker.log"
    job = enqueue(db, JobBuilder("noop", {}))
    worker = start_worker(target.cli_args(), queues=queues, log=log, prefix=["taskset", "-c", "0"])
    warning = "more process executors than this machine runs well"
    try:
        if warned:
            wait_for(lambda: warning in log.read_text(), 60, "the warning")
            line = next(x for x in log.read_text().splitlines() if warning in x)
            assert "process_executors=17" in line and "cpus=1" in line
            assert "async def workers run many jobs in one process" in line
            assert "--process-executors" in line
        else:
            wait_for(lambda: _completed(db, job.id), 60, "the job ran")
            assert warning not in log.read_text()
    finally:
        stop(worker)
