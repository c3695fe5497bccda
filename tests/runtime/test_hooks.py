"""Middleware and lifecycle hooks in real pools: process executors, async executors, and a
thread pool's Lifeline, on both backends (see ``tests/support/hooks_app.py``)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from kickside_engine import Database, JobState, claim, get_job
from kickside_engine.clock import utcnow
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..support import hooks_app
from ..support.processes import wait_for

pytestmark = pytest.mark.slow

FINAL = (JobState.COMPLETED, JobState.DISCARDED)


@pytest.fixture
def hooks_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    path = str(tmp_path / "hooks.log")
    monkeypatch.setenv("KST_HOOKS_LOG", path)  # executors inherit it
    return path


@contextmanager
def _pool(db: Database, **options: Any) -> Iterator[WorkerPool]:
    config: dict[str, Any] = {"queues": {"default": 4}, "run_plugins": False, **options}
    pool = WorkerPool(db, PoolConfig(**config))
    pool.start()
    try:
        yield pool
    finally:
        pool.stop(30)


def _final(db: Database, *ids: uuid.UUID) -> bool:
    return all(get_job(db, i).state in FINAL for i in ids)  # type: ignore[union-attr]


def _tags(path: str, job_id: uuid.UUID) -> list[str]:
    return [tag for tag, found in hooks_app.read_log(path) if found == str(job_id)]


def _run_three(db: Database, hooks_log: str, worker: Any, **pool: Any) -> dict[str, Any]:
    """Run a plain job, one whose middleware replaces its result, and one whose middleware
    raises (on its only attempt); return their rows and log tags."""
    ok = worker.new({}).meta({"tenant": "acme"}).insert(db)
    replaced = worker.new({"replace": 7}).insert(db)
    refused = worker.new({"refuse": True}).max_attempts(1).insert(db)
    ids = (ok.id, replaced.id, refused.id)
    with _pool(db, **pool):
        wait_for(lambda: _final(db, *ids), 60, "three final jobs")
        wait_for(lambda: "discard" in _tags(hooks_log, refused.id), 10, "the discard hook")
    names = ("ok", "replaced", "refused")
    return {
        **{n: get_job(db, i) for n, i in zip(names, ids, strict=True)},
        **{f"{n}_tags": _tags(hooks_log, i) for n, i in zip(names, ids, strict=True)},
    }


def test_middleware_and_hooks_around_process_executors(
    db: Database, hooks_log: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="kickside.hooks")
    seen = _run_three(
        db, hooks_log, hooks_app.echo, app="tests.support.hooks_app", process_executors=1
    )
    # First registered is outermost; the middleware's args reach the worker; hooks around it.
    assert seen["ok_tags"] == [
        "enqueue",
        "start",
        "outer-in",
        "inner-in",
        "worker",
        "inner-out",
        "outer-out",
        "stop:done",
    ]
    assert seen["ok"].result == {"tenant": "acme"}
    assert seen["replaced"].state is JobState.COMPLETED
    assert seen["replaced"].result == {"replaced": 7}
    # A middleware that raises fails the attempt as the worker would, never calling it.
    refused = seen["refused"]
    assert refused.state is JobState.DISCARDED
    assert "RuntimeError: middleware refused" in refused.errors[-1].error
    assert "hunter2" not in refused.errors[-1].error
    refused_tags = ["enqueue", "start", "outer-in", "inner-in", "stop:error", "discard"]
    assert seen["refused_tags"] == refused_tags
    # The failing hooks ran before the others every time: logged, redacted, nothing lost.
    failures = [r.getMessage() for r in caplog.records if r.name == "kickside.hooks"]
    assert sum("hook broken_start failed" in m for m in failures) == 3
    assert sum("hook broken_stop failed" in m for m in failures) == 3
    assert all("hunter2" not in m for m in failures)


def test_async_middleware_wraps_async_workers_on_async_executors(
    db: Database, hooks_log: str
) -> None:
    seen = _run_three(
        db,
        hooks_log,
        hooks_app.async_echo,
        app="tests.support.hooks_app",
        process_executors=0,
        async_executors=1,
    )
    # Only the async middleware wraps an async worker (a sync one would exit before it ran).
    assert seen["ok_tags"] == [
        "enqueue",
        "start",
        "aouter-in",
        "ainner-in",
        "aworker",
        "ainner-out",
        "aouter-out",
        "stop:done",
    ]
    assert seen["ok"].result == {"tenant": "acme"}
    assert seen["replaced"].result == {"replaced": 7}
    assert seen["refused"].state is JobState.DISCARDED
    assert "middleware refused: password=[REDACTED]" in seen["refused"].errors[-1].error
    assert seen["refused_tags"][-2:] == ["stop:error", "discard"]


def test_the_lifeline_calls_on_rescue_and_the_rescued_job_runs_again(
    db: Database, hooks_log: str
) -> None:
    long_ago = utcnow() - timedelta(minutes=5)
    inserted = hooks_app.echo.new({}).insert(db, now=long_ago)
    # A node that claimed it and vanished: its lease expired long ago.
    (lost,) = claim(db, queue="default", node="gone", now=long_ago, lease=timedelta(seconds=3))
    assert lost.job.id == inserted.id
    with _pool(db, mode="thread", registry=hooks_app.registry, run_plugins=True):
        wait_for(lambda: _final(db, inserted.id), 60, "the rescued job to run")
        wait_for(lambda: "rescue" in _tags(hooks_log, inserted.id), 10, "the rescue hook")
    tags = _tags(hooks_log, inserted.id)
    # The rescue wakes the queue: the job may start before the plugin thread calls the hook.
    assert tags.count("rescue") == 1 and tags.count("start") == 1
    assert tags[0] == "enqueue" and "stop:done" in tags
    assert get_job(db, inserted.id).rescue_count == 1  # type: ignore[union-attr]
