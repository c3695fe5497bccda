"""One structured, redacted log record per execution start, stop and exception."""

from __future__ import annotations

import logging

import pytest

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..support.processes import wait_for
from ..support.workers import registry


def test_an_embedded_pool_logs_each_execution(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="kickside")
    ok = enqueue(db, JobBuilder("ok", {"n": 1}))
    retrying = enqueue(db, JobBuilder("fail", {"message": "upstream 503"}))
    leaky = enqueue(db, JobBuilder("leaky").max_attempts(1))
    pool = WorkerPool(db, PoolConfig(queues={"default": 2}, mode="thread", registry=registry))
    pool.start()
    try:
        wait_for(
            lambda: all(
                get_job(db, i.id).state
                in (
                    JobState.COMPLETED,
                    JobState.RETRYABLE,  # type: ignore[union-attr]
                    JobState.DISCARDED,
                )
                for i in (ok, retrying, leaky)
            ),
            30,
            "three settled jobs",
        )
    finally:
        pool.stop(30)
    records = [r for r in caplog.records if r.name == "kickside.job"]
    starts = {r.job_id: r for r in records if r.getMessage() == "job.start"}  # type: ignore[attr-defined]
    assert set(starts) == {str(ok.id), str(retrying.id), str(leaky.id)}
    assert all(
        isinstance(r.queue_ms, int) and r.worker and r.queue == "default"  # type: ignore[attr-defined]
        for r in starts.values()
    )
    (stop,) = [r for r in records if r.getMessage() == "job.stop"]
    assert stop.job_id == str(ok.id) and stop.outcome == "done"  # type: ignore[attr-defined]
    assert isinstance(stop.duration_ms, int)  # type: ignore[attr-defined]
    exceptions = {r.job_id: r for r in records if r.getMessage() == "job.exception"}  # type: ignore[attr-defined]
    assert exceptions[str(retrying.id)].levelno == logging.WARNING  # it will retry
    assert exceptions[str(leaky.id)].levelno == logging.ERROR  # discarded: out of attempts
    text = exceptions[str(leaky.id)].error  # type: ignore[attr-defined]
    assert "not-a-password" not in text and "api.example.com" in text
