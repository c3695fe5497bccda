"""Async workloads: ``async def`` jobs on one pool whose only executor is an async executor.

- ``async_drain``: 20,000 queued async no-op jobs, one pool at concurrency 10 (one async
  executor with 10 slots), timed as ``drain`` is (from the insert's commit until every job is
  completed, polled every 50 ms; median of 3). Each run also measures the CPU per 1,000 jobs of
  the pool (every process of it) plus PostgreSQL's server processes, as ``multi_node`` does
  (:mod:`bench.cpu`): the async executors' CPU per job.
- ``io_drain``: 40,000 jobs that each ``await asyncio.sleep(0.01)``, 200 slots (queue
  concurrency 200, one async executor with 200 slots). By Little's law 200 jobs in flight that
  last 10 ms each finish at most 20,000 jobs/s: the figure is reported with its fraction of
  that limit.
- ``async_latency``: enqueue-to-start as ``latency`` measures it, with an idle async pool in
  its own process (concurrency 10) and an ``async def`` stamp job.

Each workload starts a pool of its own (:class:`PoolProcess` with ``async_slots``), ready before
the clock starts, and stops it afterwards.
"""

from __future__ import annotations

import time
from typing import Any

from bench.cpu import PostgresCpu, cpu_per_1000_jobs
from bench.targets import reset
from bench.workloads.common import (
    Context,
    Measurement,
    median,
    state_counts,
    wait_completed,
)
from bench.workloads.latency import measure_latency
from bench.workloads.pools import CONCURRENCY, PoolProcess
from kickside_engine import Database, JobBuilder, enqueue_fanout

ASYNC_APP = "bench.workloads.async_app"
ASYNC_DRAIN_JOBS = 20_000
IO_DRAIN_JOBS = 40_000
IO_SLOTS = 200
IO_SECONDS = 0.01
#: Little's law: slots / job duration is the most jobs/s any system can finish.
IO_LIMIT_JOBS_PER_S = IO_SLOTS / IO_SECONDS
REPEATS = 3
POLL_S = 0.05


def async_pool(ctx: Context, slots: int) -> PoolProcess:
    """A pool process whose one executor is an async executor with ``slots`` slots."""
    return PoolProcess(
        ctx.target,
        concurrency=slots,
        log=ctx.workdir / f"pool-async-{slots}-{ctx.target.backend}.log",
        app=ASYNC_APP,
        async_slots=slots,
    )


def _drain_runs(
    ctx: Context, db: Database, name: str, worker: str, args: dict[str, Any], slots: int, n: int
) -> tuple[list[dict[str, float]], dict[str, Any]]:
    """:data:`REPEATS` timed drains of ``n`` ``worker`` jobs; each run's figures, and details."""
    pg = PostgresCpu.locate(db)
    runs: list[dict[str, float]] = []
    reset(db)
    ctx.progress(f"{name}: starting an async pool ({slots} slots)")
    with async_pool(ctx, slots) as pool:
        for attempt in range(REPEATS):
            reset(db)
            ctx.progress(f"{name}: run {attempt + 1}/{REPEATS}, {n} jobs")
            enqueue_fanout(db, JobBuilder(worker, {}), [args] * n)
            pool_before, pg_before = pool.cpu_seconds(), pg.seconds()
            started = time.monotonic()
            finished = wait_completed(db, n, poll_seconds=POLL_S)
            pool_cpu, pg_after = pool.cpu_seconds() - pool_before, pg.seconds()
            seconds = finished - started
            runs.append(
                {
                    "seconds": seconds,
                    "jobs_per_s": n / seconds,
                    **cpu_per_1000_jobs(n, pool_cpu, pg_before, pg_after),
                }
            )
        states = state_counts(db)
    details = {
        "states_after_last_run": states,
        "completion_poll_s": POLL_S,
        "executors": f"1 async executor, {slots} slots, no process executor",
        "postgresql_cpu": "measured" if pg.reason is None else f"n/a: {pg.reason}",
    }
    return runs, details


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    names = [k for k in runs[0] if k != "seconds" and all(k in r for r in runs)]
    return {k: median([r[k] for r in runs]) for k in names}


def async_drain(ctx: Context) -> Measurement:
    """Async no-op jobs/s at concurrency 10, median of :data:`REPEATS`; CPU per 1,000 jobs."""
    n = ctx.count(ASYNC_DRAIN_JOBS)
    db = ctx.target.open()
    try:
        runs, details = _drain_runs(ctx, db, "async_drain", "noop", {}, CONCURRENCY, n)
    finally:
        db.dispose()
    return Measurement(
        workload="async_drain",
        backend=ctx.target.backend,
        params={"jobs": n, "repeats": REPEATS, "concurrency": CONCURRENCY, "pools": 1},
        metrics=_medians(runs),
        runs=runs,
        details=details,
    )


def io_drain(ctx: Context) -> Measurement:
    """Jobs/s of 10 ms I/O-bound async jobs at 200 slots, and its fraction of Little's limit."""
    n = ctx.count(IO_DRAIN_JOBS, minimum=IO_SLOTS)
    db = ctx.target.open()
    try:
        runs, details = _drain_runs(ctx, db, "io_drain", "io", {"seconds": IO_SECONDS}, IO_SLOTS, n)
    finally:
        db.dispose()
    metrics = _medians(runs)
    metrics["limit_fraction"] = metrics["jobs_per_s"] / IO_LIMIT_JOBS_PER_S
    return Measurement(
        workload="io_drain",
        backend=ctx.target.backend,
        params={
            "jobs": n,
            "repeats": REPEATS,
            "concurrency": IO_SLOTS,
            "job_seconds": IO_SECONDS,
            "limit_jobs_per_s": IO_LIMIT_JOBS_PER_S,
            "pools": 1,
        },
        metrics=metrics,
        runs=runs,
        details=details,
    )


def async_latency(ctx: Context) -> Measurement:
    """Enqueue-to-start p50/p99 of an ``async def`` job, idle async pool in its own process."""
    db = ctx.target.open()
    try:
        measured = measure_latency(ctx, db, "async_latency", async_pool(ctx, CONCURRENCY))
    finally:
        db.dispose()
    measured.details["executors"] = f"1 async executor, {CONCURRENCY} slots"
    return measured
