"""Racing claimers in separate processes: every job runs exactly once, on both backends."""

from __future__ import annotations

import multiprocessing
import time

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, RunOutcome, enqueue_many

from ..conftest import Target
from ..support.claim_procs import claim_until_empty

pytestmark = pytest.mark.slow
PROCESSES = 4
JOBS = 400


def test_four_processes_claim_every_job_exactly_once(db: Database, target: Target) -> None:
    enqueue_many(db, [JobBuilder("race", {"n": i}).queue("race") for i in range(JOBS)])
    ctx = multiprocessing.get_context("spawn")
    start_at = time.time() + 4  # time for every interpreter to start
    with ctx.Pool(PROCESSES) as pool:
        counts = pool.starmap(
            claim_until_empty,
            [
                (target.url, target.schema, f"racer-{i}", 1 + i * 3, start_at)
                for i in range(PROCESSES)
            ],
        )
    assert sum(counts) == JOBS
    assert sum(1 for c in counts if c > 0) >= 2  # they really raced
    job, run = db.tables.job, db.tables.job_run
    with db.read() as conn:
        states = dict(
            conn.execute(sa.select(job.c.state, sa.func.count()).group_by(job.c.state)).all()
        )
        per_job = conn.execute(
            sa.select(run.c.job_id, sa.func.count()).group_by(run.c.job_id)
        ).all()
        outcomes = set(conn.execute(sa.select(run.c.outcome).distinct()).scalars())
    assert states == {"completed": JOBS}
    assert len(per_job) == JOBS and {n for _, n in per_job} == {1}
    assert outcomes == {RunOutcome.COMPLETED.value}
