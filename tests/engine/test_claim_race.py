"""Racing claimers and cron ticks in separate processes: every job runs exactly once and
every cron run fires exactly once, on both backends."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, RunOutcome, enqueue_many

from ..conftest import Target
from ..support.claim_procs import claim_until_empty
from ..support.cron_procs import tick_in_step

pytestmark = pytest.mark.slow
PROCESSES = 4
JOBS = 400


def test_four_processes_claim_every_job_exactly_once(db: Database, target: Target) -> None:
    enqueue_many(db, [JobBuilder("race", {"n": i}).queue("race") for i in range(JOBS)])
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(PROCESSES) as pool:
        ready = manager.Barrier(PROCESSES)  # every interpreter up before the first claim
        counts = pool.starmap(
            claim_until_empty,
            [(target.url, target.schema, f"racer-{i}", 1 + i * 3, ready) for i in range(PROCESSES)],
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


def test_four_processes_ticking_cron_in_step_fire_each_run_exactly_once(
    db: Database, target: Target
) -> None:
    first, every, ticks = datetime(2030, 3, 31, 0, 55, tzinfo=UTC), timedelta(seconds=15), 41
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(PROCESSES) as pool:
        ready = manager.Barrier(PROCESSES)  # every interpreter up before the first tick
        start = manager.Value("d", 0.0)  # the racers' one clock
        won = pool.starmap(
            tick_in_step,
            [
                (target.url, target.schema, first, ticks, every, ready, start, 0.05, seed)
                for seed in range(PROCESSES)
            ],
        )
    runs = sorted(run for racer in won for run in racer)
    minute = [(first + timedelta(minutes=m)).isoformat() for m in range(11)]  # 00:55..01:05
    expected = sorted(
        [("minutely", t) for t in minute]
        + [("berlin_nightly", "2030-03-31T01:00:00+00:00")]  # 02:30 skipped: 03:00 CEST
        + [("new_york_5min", t) for t in minute[::5]]
    )
    assert runs == expected  # every run fired, none twice, whichever racer won it
    assert sum(1 for racer in won if racer) >= 2  # they really raced
    job, execution = db.tables.job, db.tables.recurring_execution
    with db.read() as conn:
        jobs = conn.execute(sa.select(sa.func.count()).select_from(job)).scalar_one()
        linked = conn.execute(
            sa.select(sa.func.count(sa.distinct(execution.c.job_id)))
        ).scalar_one()
    assert jobs == linked == len(expected)
