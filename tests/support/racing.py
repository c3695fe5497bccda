"""What the multi-process race tests share, on the test process's side: the module's pool of
spawned processes, the keyed jobs they race for, and the runs stored for those jobs.

The children's work is in :mod:`tests.support.slot_procs` and its siblings, which the spawned
interpreters import; this module is never imported there.
"""

from __future__ import annotations

import multiprocessing.pool
import random
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, RunOutcome, WorkerSpec

from ..conftest import Target
from . import slot_procs


def spawned_processes(processes: int) -> Any:
    """A module-scoped fixture (named by the attribute it is assigned to, ``procs = ...``): a
    pool of ``processes`` freshly spawned interpreters, closed once the module's tests ran."""

    @pytest.fixture(scope="module")
    def procs() -> Iterator[multiprocessing.pool.Pool]:
        pool = slot_procs.spawn_pool(processes)
        try:
            yield pool
        finally:
            pool.close()
            pool.join()

    return procs


def keyed_jobs(db: Database, spec: WorkerSpec, count: int, keys: int) -> list[str]:
    """Insert ``count`` jobs of ``spec`` whose concurrency keys take turns over ``keys`` keys
    (``key0``, ``key1`` ...); their ids."""
    return [
        str(JobBuilder.for_worker(spec, {"i": i}).concurrency_key(f"key{i % keys}").insert(db).id)
        for i in range(count)
    ]


def racer_args(
    target: Target, queue: str, job_ids: list[str], processes: int, *extra: Any
) -> list[tuple[Any, ...]]:
    """Each racing process's arguments: the database, ``queue``, ``job_ids``, its node name
    (``p0``, ``p1`` ...) and a random seed of its own, then ``extra``."""
    return [
        (target.url, target.schema, queue, job_ids, f"p{n}", random.randrange(1 << 30), *extra)
        for n in range(processes)
    ]


def completed_runs(db: Database, job_ids: Sequence[str]) -> list[sa.Row[Any]]:
    """The run of each of ``job_ids`` as stored (``id``, ``concurrency_key``, ``started_at``,
    ``finished_at``): one per job, each completed."""
    job, run = db.tables.job, db.tables.job_run
    with db.read() as conn:
        rows = conn.execute(
            sa.select(
                job.c.id, job.c.concurrency_key, run.c.started_at, run.c.finished_at, run.c.outcome
            )
            .join(run, run.c.job_id == job.c.id)
            .where(job.c.id.in_([uuid.UUID(i) for i in job_ids]))
        ).all()
    assert len(rows) == len(job_ids)
    assert all(r.outcome == RunOutcome.COMPLETED.value for r in rows)
    return list(rows)
