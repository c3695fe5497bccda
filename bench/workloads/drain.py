"""Workload 3: drain 20,000 queued no-op jobs with one pool at concurrency 10.

The pool runs in a process of its own, as ``kickside worker`` does, and is fully started (every
executor has loaded the app) before the clock starts. Each run bulk-inserts the jobs, then
times from the insert's commit until every job is completed (seen by polling every 50 ms). The
figure is the median of 3. Each run also records the CPU seconds the pool process and its
executors used, per 1,000 jobs (PostgreSQL's own CPU is not counted: other clients share it).
"""

from __future__ import annotations

import time

from bench.targets import reset
from bench.workloads.common import (
    Context,
    Measurement,
    median,
    state_counts,
    wait_completed,
)
from bench.workloads.pools import CONCURRENCY
from kickside_engine import JobBuilder, enqueue_many

DRAIN_JOBS = 20_000
REPEATS = 3
POLL_S = 0.05


def drain(ctx: Context) -> Measurement:
    """Jobs/s from commit to the last completion, median of :data:`REPEATS` runs."""
    n = ctx.count(DRAIN_JOBS)
    backend = ctx.target.backend
    db = ctx.target.open()
    runs: list[dict[str, float]] = []
    try:
        reset(db)
        ctx.progress(f"drain: starting a pool (concurrency {CONCURRENCY})")
        with ctx.pool() as pool:
            for attempt in range(REPEATS):
                reset(db)
                ctx.progress(f"drain: run {attempt + 1}/{REPEATS}, {n} jobs")
                enqueue_many(db, [JobBuilder("noop", {}) for _ in range(n)])
                cpu_before = pool.cpu_seconds()
                started = time.monotonic()
                finished = wait_completed(db, n, poll_seconds=POLL_S)
                seconds = finished - started
                cpu = pool.cpu_seconds() - cpu_before
                runs.append(
                    {
                        "seconds": seconds,
                        "jobs_per_s": n / seconds,
                        "pool_cpu_s_per_1000_jobs": cpu / n * 1000,
                    }
                )
            states = state_counts(db)
        return Measurement(
            workload="drain",
            backend=backend,
            params={"jobs": n, "repeats": REPEATS, "concurrency": CONCURRENCY, "pools": 1},
            metrics={
                "jobs_per_s": median([r["jobs_per_s"] for r in runs]),
                "pool_cpu_s_per_1000_jobs": median([r["pool_cpu_s_per_1000_jobs"] for r in runs]),
            },
            runs=runs,
            details={"states_after_last_run": states, "completion_poll_s": POLL_S},
        )
    finally:
        db.dispose()
