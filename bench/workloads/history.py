"""Workload 5: claim-and-complete cost with 10,000 versus 1,000,000 completed jobs in history.

History is generated in the database with one ``INSERT ... SELECT generate_series`` per table
(PostgreSQL only): completed jobs spread over the last six days with time-ordered ids like the
engine's UUIDv7, and one settled run each. This statement belongs to the harness, never to the
product. Statistics are then refreshed, as autovacuum would have done for a table that grew
like this, and the server checkpoints (as before every workload) so the history's writes are
not flushed during the measurement. Then the same jobs are claimed (batches of 10, ``claim``)
and completed (``record``, one transaction per batch) through the public API; the figure is
microseconds per job, and the slowdown is the large history's cost over the small one's (it
must stay flat).
"""

from __future__ import annotations

import time
from datetime import timedelta

from sqlalchemy import text

from bench.targets import analyze, checkpoint, reset
from bench.workloads.common import Context, Measurement, median
from kickside_engine import Database, JobBuilder, claim, enqueue_many, record
from kickside_engine.clock import utcnow
from kickside_engine.lifecycle import ExecutionResult, ResultKind

SMALL_HISTORY = 10_000
LARGE_HISTORY = 1_000_000
CLAIMED_JOBS = 2_000
BATCH = 10
ROUNDS = 3
HISTORY_SPAN = timedelta(days=6)

_JOBS_SQL = """
INSERT INTO {job} (
    id, kind, state, queue, worker, args, meta, tags, errors, attempt, max_attempts, priority,
    demand_pending, control_pending, demand_seq, rescue_count, lease_owner,
    inserted_at, scheduled_at, attempted_at, completed_at, finalized_at, updated_at
)
SELECT
    (lpad(to_hex((extract(epoch FROM t) * 1000)::bigint), 12, '0')
        || substr(md5(g::text || random()::text), 1, 20))::uuid,
    'oneshot', 'completed', 'default', 'noop', '{{}}', '{{}}', '[]', '[]', 1, 20, 0,
    false, false, 0, 0, 'bench:history',
    t, t, t, t, t, t
FROM (
    SELECT g, CAST(:start AS timestamptz) + g * CAST(:span AS interval) / :n AS t
    FROM generate_series(1, :n) AS g
) AS s
"""

_RUNS_SQL = """
INSERT INTO {run} (
    job_id, attempt, queue, worker, node, lease_token, queue_ms,
    started_at, finished_at, duration_ms, outcome
)
SELECT id, 1, queue, worker, 'bench:history', gen_random_uuid(), 0,
    attempted_at, finalized_at, 0, 'completed'
FROM {job}
"""


def insert_history(db: Database, size: int) -> None:
    """Fill empty tables with ``size`` completed jobs and their runs, fast (PostgreSQL)."""
    quote = db.engine.dialect.identifier_preparer.format_table
    job, run = quote(db.tables.job), quote(db.tables.job_run)
    start = utcnow() - HISTORY_SPAN - timedelta(minutes=5)
    with db.begin() as conn:
        conn.execute(
            text(_JOBS_SQL.format(job=job)), {"start": start, "span": HISTORY_SPAN, "n": size}
        )
        conn.execute(text(_RUNS_SQL.format(run=run, job=job)))
    analyze(db)


def claim_and_complete(db: Database, n: int) -> float:
    """Enqueue ``n`` no-op jobs, then claim and complete them all; seconds spent doing so."""
    enqueue_many(db, [JobBuilder("noop", {}) for _ in range(n)])
    done = 0
    started = time.perf_counter()
    while True:
        batch = claim(db, queue="default", node="bench:history", limit=BATCH)
        if not batch:
            break
        finished = utcnow()
        record(db, [(c, ExecutionResult(ResultKind.DONE, finished, 0)) for c in batch])
        done += len(batch)
    seconds = time.perf_counter() - started
    if done != n:
        raise RuntimeError(f"claimed {done} jobs, expected {n}")
    return seconds


def history_scale(ctx: Context) -> Measurement:
    """Microseconds per claimed-and-completed job at both history sizes, and their ratio."""
    if ctx.target.backend != "postgresql":
        raise ValueError("history_scale generates its history with PostgreSQL's generate_series")
    n = ctx.count(CLAIMED_JOBS)
    sizes = {"small": ctx.count(SMALL_HISTORY), "large": ctx.count(LARGE_HISTORY)}
    db = ctx.target.open()
    runs: list[dict[str, float]] = []
    per_job: dict[str, float] = {}
    try:
        for label, size in sizes.items():
            reset(db)
            ctx.progress(f"history_scale: generating {size} completed jobs")
            began = time.perf_counter()
            insert_history(db, size)
            generated = time.perf_counter() - began
            # The history's own writes (a million rows: a gigabyte of WAL) must not land on the
            # measurement as a checkpoint in the middle of it: a full run measured 1.39x with
            # one, 1.07x without.
            checkpoint(ctx.target.url, ctx.progress)
            costs = []
            for attempt in range(ROUNDS):
                ctx.progress(f"history_scale: {label} history, round {attempt + 1}/{ROUNDS}")
                seconds = claim_and_complete(db, n)
                costs.append(seconds / n * 1e6)
                runs.append({"history": size, "us_per_job": costs[-1]})
            per_job[label] = median(costs)
            runs.append({"history": size, "generate_s": generated})
        reset(db)
        return Measurement(
            workload="history_scale",
            backend=ctx.target.backend,
            params={"jobs": n, "batch": BATCH, "rounds": ROUNDS, "history": sizes},
            metrics={
                "small_us_per_job": per_job["small"],
                "large_us_per_job": per_job["large"],
                "slowdown": per_job["large"] / per_job["small"],
            },
            runs=runs,
        )
    finally:
        db.dispose()
