"""Progress through real pools: a reader sees a running job's progress change (the public read
API and ``kickside job --json``), a tight loop of reports costs a handful of writes, async and
thread executors report too, and a bad value fails the attempt with its reason."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.store.progress import PROGRESS_WRITE_MARK
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support import progress_app
from ..support.processes import wait_for

pytestmark = pytest.mark.slow

APP = "tests.support.progress_app"


@contextmanager
def _pool(db: Database, **options: Any) -> Iterator[WorkerPool]:
    config: dict[str, Any] = {
        "queues": {"default": 4},
        "mode": "process",
        "app": APP,
        "run_plugins": False,
    }
    pool = WorkerPool(db, PoolConfig(**{**config, **options}))
    pool.start()
    try:
        yield pool
    finally:
        pool.stop(30)


@contextmanager
def _counting_progress_writes(db: Database) -> Iterator[list[str]]:
    """The progress writes this process's engine runs (the pool's supervisor writes them)."""
    seen: list[str] = []
    lock = threading.Lock()

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if PROGRESS_WRITE_MARK in statement:
            with lock:
                seen.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", before)


def _progress(db: Database, job_id: uuid.UUID) -> Any:
    job = get_job(db, job_id)
    assert job is not None
    return job.progress


def _state(db: Database, job_id: uuid.UUID) -> JobState:
    job = get_job(db, job_id)
    assert job is not None
    return job.state


def _cli_progress(target: Target, job_id: uuid.UUID) -> Any:
    done = CliRunner().invoke(app, [*target.cli_args(), "job", str(job_id), "--json"])
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)["job"]
    return document["state"], document["progress"]


def _step_through(db: Database, job_id: uuid.UUID, gate: Path, steps: int, shown: Any) -> None:
    """Open the gate one step at a time, each once a reader sees the job's report of it."""
    for i in range(steps):
        expected = shown(i)
        wait_for(lambda e=expected: _progress(db, job_id) == e, 30, f"progress {expected}")
        assert _state(db, job_id) is JobState.EXECUTING
        gate.write_text(str(i + 1))


def test_a_reader_sees_a_running_jobs_progress_change(
    db: Database, target: Target, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    job_id = enqueue(
        db, JobBuilder("stepped", {"steps": 3, "gate": str(gate), "token": "tok-123"})
    ).id
    with _pool(db):
        wait_for(lambda: _progress(db, job_id) is not None, 60, "the first report")
        # kickside job --json shows the live value, redacted.
        state, shown = _cli_progress(target, job_id)
        assert state == "executing"
        assert shown == {"step": 0, "of": 3, "token": "[REDACTED]"}
        _step_through(db, job_id, gate, 3, lambda i: {"step": i, "of": 3, "token": "tok-123"})
        wait_for(lambda: _state(db, job_id) is JobState.COMPLETED, 30, "completed")
    assert _cli_progress(target, job_id) == (
        "completed",
        {"step": 2, "of": 3, "token": "[REDACTED]"},
    )


def test_a_tight_loop_of_100000_reports_costs_a_handful_of_writes(db: Database) -> None:
    with _counting_progress_writes(db) as writes, _pool(db):
        job_id = enqueue(db, JobBuilder("flood", {"count": 100_000})).id
        wait_for(lambda: _state(db, job_id) is JobState.COMPLETED, 120, "the flood completed")
    # One report a second leaves the executor, and the last rides on the settle.
    assert len(writes) <= 5, f"{len(writes)} progress writes for 100000 reports"
    print(f"{len(writes)} progress writes for 100000 reports")
    assert _progress(db, job_id) == 1.0


def test_an_async_worker_reports_progress_from_an_async_executor(
    db: Database, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    job_id = enqueue(db, JobBuilder("async_stepped", {"steps": 2, "gate": str(gate)})).id
    with _pool(db, process_executors=0, async_executors=1) as pool:
        _step_through(db, job_id, gate, 2, lambda i: (i + 1) / 3)
        wait_for(lambda: _state(db, job_id) is JobState.COMPLETED, 30, "completed")
        assert all(ex.is_async for ex in pool.executors)


def test_a_thread_pool_reports_progress(db: Database, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    job_id = enqueue(db, JobBuilder("stepped", {"steps": 2, "gate": str(gate)})).id
    with _pool(db, mode="thread", app=None, registry=progress_app.registry):
        _step_through(db, job_id, gate, 2, lambda i: {"step": i, "of": 2, "token": ""})
        wait_for(lambda: _state(db, job_id) is JobState.COMPLETED, 30, "completed")


def test_a_bad_progress_value_fails_the_attempt_with_its_reason(db: Database) -> None:
    job_id = enqueue(db, JobBuilder("bad_progress", {"value": 1.5})).id
    with _pool(db):
        wait_for(lambda: _state(db, job_id) is JobState.RETRYABLE, 60, "the attempt failed")
    job = get_job(db, job_id)
    assert job is not None and job.progress is None
    assert job.errors[-1].error.startswith(
        "ProgressNotStorableError: progress fraction must be between 0 and 1, got 1.5"
    )


def test_the_pool_writes_once_per_interval_and_an_outcome_carries_what_it_did_not_write(
    db: Database,
) -> None:
    from kickside_engine.clock import utcnow
    from kickside_engine.lifecycle import ExecutionResult, ResultKind
    from kickside_engine.runtime.progress_buffer import ProgressBuffer

    buffer = ProgressBuffer(interval_seconds=60)
    a, b = uuid.uuid4(), uuid.uuid4()
    with _counting_progress_writes(db) as writes:
        buffer.note(a, 0.1)
        buffer.write_due(db, "n1", mono=0.0)  # due: written (fenced: no such lease here)
        buffer.note(a, 0.2)
        buffer.note(b, 0.3)
        buffer.write_due(db, "n1", mono=30.0)  # within the interval: kept
    assert len(writes) == 1 and buffer.next_due == 60.0
    crashed = ExecutionResult(ResultKind.CRASH, utcnow(), 5, error="crash")
    assert buffer.carried_by(a, crashed).progress == 0.2
    newer = ExecutionResult(ResultKind.DONE, utcnow(), 5, progress=1.0)
    assert buffer.carried_by(b, newer).progress == 1.0  # the executor's own last value wins
    assert buffer.latest == {} and buffer.next_due == float("inf")
