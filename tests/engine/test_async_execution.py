"""``async def`` workers outside a pool: perform_job and drain_jobs run them to their end."""

from __future__ import annotations

import pytest

from kickside_engine import Database, Done, JobBuilder, JobState, enqueue, get_job
from kickside_engine.testing import drain_jobs, perform_job

from ..support.async_app import AsyncClassWorker, async_fail, async_sleep, registry


def test_perform_job_runs_an_async_worker() -> None:
    assert perform_job(async_sleep, {"seconds": 0}) == Done()
    assert perform_job(AsyncClassWorker, {}) == Done()


def test_perform_job_propagates_an_async_workers_exception() -> None:
    with pytest.raises(ValueError, match="boom"):
        perform_job(async_fail, {})


def test_drain_jobs_runs_async_workers(db: Database) -> None:
    job = enqueue(db, JobBuilder("async_sleep", {"seconds": 0}))
    failing = enqueue(db, JobBuilder("async_fail", {}))
    drain_jobs(db, registry)
    assert get_job(db, job.id).state is JobState.COMPLETED  # type: ignore[union-attr]
    failed = get_job(db, failing.id)
    assert failed is not None and failed.state is JobState.RETRYABLE
    assert "ValueError: boom" in failed.errors[0].error
