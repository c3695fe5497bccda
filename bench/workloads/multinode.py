"""Workload 6: 1, 2 and 4 pools, each in a process of its own, draining 40,000 jobs together.

Every pool is a :mod:`bench.workloads.poolhost` process (process mode, concurrency 10), as
``kickside worker`` runs on each machine of a deployment; the pools are added one count after
the other (1, then 2, then 4) and all are ready before the clock starts. Each count inserts the
jobs, then times from the insert's commit until every job is completed, and measures:

- jobs/s, and CPU seconds per 1,000 jobs: the pools (every process of each pool) plus
  PostgreSQL's server processes (:mod:`bench.cpu`; ``null`` with the reason when
  the server is not on this machine);
- duplicates: every job is a ``span`` job, which logs its execution (from the claim that handed
  it over to the end of its body). An execution beyond one per job is an *extra execution*; two
  executions of one job whose intervals overlap are a *concurrent duplicate* (must be 0). The
  run history (``kickside_job_run``: one row per execution the engine recorded) is checked the
  same way. The logs are read once every pool has stopped, so late executions are counted too.

The 4-pool/1-pool ratios of throughput and of CPU per 1,000 jobs are what issue 8 sets targets
for: the throughput must not collapse under contention, and the CPU per job must stay within
1.2x (on a 2-core machine 4 pools cannot be faster; a real deployment adds machines).
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import func, select

from bench.cpu import PostgresCpu, cpu_per_1000_jobs
from bench.nodes import MULTI_JOBS, Span, duplicates, multi_node_metrics, read_spans
from bench.targets import reset
from bench.workloads.common import Context, Measurement, state_counts, wait_completed
from bench.workloads.pools import CONCURRENCY, PoolProcess
from kickside_engine import Database, JobBuilder, enqueue_many

POLL_S = 0.05


def run_history_spans(db: Database) -> tuple[int, list[Span]]:
    """The number of runs recorded, and the runs of every job that has more than one."""
    run = db.tables.job_run
    repeated = select(run.c.job_id).group_by(run.c.job_id).having(func.count() > 1)
    with db.read() as conn:
        total = int(conn.execute(select(func.count()).select_from(run)).scalar_one())
        rows = conn.execute(
            select(run.c.job_id, run.c.started_at, run.c.finished_at).where(
                run.c.job_id.in_(repeated)
            )
        ).all()
    spans = []
    for row in rows:
        finished = row.finished_at or row.started_at
        spans.append(
            Span(str(row.job_id), _ns(row.started_at.timestamp()), _ns(finished.timestamp()))
        )
    return total, spans


def _ns(seconds: float) -> int:
    return round(seconds * 1e9)


def _start_pools(
    ctx: Context, stack: contextlib.ExitStack, first: int, count: int
) -> list[PoolProcess]:
    """Start pools ``first .. first+count-1`` side by side; each is stopped by ``stack``."""
    pools = [
        PoolProcess(ctx.target, log=ctx.workdir / f"pool-multi-{i}.log")
        for i in range(first, first + count)
    ]
    with ThreadPoolExecutor(max_workers=max(1, count)) as starter:
        futures = [starter.submit(pool.__enter__) for pool in pools]
    started, errors = [], []
    for pool, future in zip(pools, futures, strict=True):
        if future.exception() is None:
            stack.push(pool)
            started.append(pool)
        else:
            errors.append(future.exception())
    if errors:
        raise RuntimeError(f"{len(errors)} pool process(es) did not start: {errors[0]}")
    return started


def _drain_once(
    ctx: Context, db: Database, pools: list[PoolProcess], pg: PostgresCpu, n: int, log: Path
) -> dict[str, float]:
    reset(db)
    ctx.progress(f"multi_node: {len(pools)} pool(s), {n} jobs")
    enqueue_many(db, [JobBuilder("span", {"log": str(log)}) for _ in range(n)])
    pool_before, pg_before = sum(p.cpu_seconds() for p in pools), pg.seconds()
    started = time.monotonic()
    finished = wait_completed(
        db, n, poll_seconds=POLL_S, what=f"{n} completed jobs with {len(pools)} pools"
    )
    pool_cpu = sum(p.cpu_seconds() for p in pools) - pool_before
    pg_after = pg.seconds()
    seconds = finished - started
    figures = {
        "pools": float(len(pools)),
        "seconds": seconds,
        "jobs_per_s": n / seconds,
        **cpu_per_1000_jobs(n, pool_cpu, pg_before, pg_after),
    }
    history_runs, history_spans = run_history_spans(db)
    history = duplicates(history_spans, 0)
    figures["history_runs"] = float(history_runs)
    figures["history_extra_runs"] = float(history_runs - n)
    figures["history_concurrent_duplicates"] = float(history["concurrent_duplicates"])
    return figures


def multi_node(ctx: Context) -> Measurement:
    """Jobs/s, CPU per 1,000 jobs and duplicate executions with 1, 2 and 4 pool processes."""
    n = ctx.count(MULTI_JOBS)
    db = ctx.target.open()
    runs: list[dict[str, float]] = []
    logs: dict[int, Path] = {}
    try:
        pg = PostgresCpu.locate(db)
        with contextlib.ExitStack() as stack:
            pools: list[PoolProcess] = []
            for count in ctx.pool_counts:
                ctx.progress(f"multi_node: starting {count - len(pools)} more pool process(es)")
                pools += _start_pools(ctx, stack, len(pools), count - len(pools))
                logs[count] = ctx.workdir / f"multi-{count}.spans"
                logs[count].unlink(missing_ok=True)
                runs.append(_drain_once(ctx, db, pools, pg, n, logs[count]))
            states = state_counts(db)
        # Every pool has stopped: an execution still under way at the last poll is logged now.
        for run, count in zip(runs, ctx.pool_counts, strict=True):
            found = duplicates(read_spans(logs[count]), n)
            run.update({k: float(v) for k, v in found.items()})
        return Measurement(
            workload="multi_node",
            backend=ctx.target.backend,
            params={"jobs": n, "pool_counts": list(ctx.pool_counts), "concurrency": CONCURRENCY},
            metrics={
                **multi_node_metrics(runs),
                "history_concurrent_duplicates": sum(
                    r["history_concurrent_duplicates"] for r in runs
                ),
                "history_extra_runs": sum(r["history_extra_runs"] for r in runs),
            },
            runs=runs,
            details={
                "states_after_last_run": states,
                "postgresql_cpu": "measured" if pg.reason is None else f"n/a: {pg.reason}",
                "cpu_ratio_of": "pools + PostgreSQL" if pg.reason is None else "pools only",
                "completion_poll_s": POLL_S,
                "note": "one drain per pool count; pools added 1 -> 2 -> 4, all ready before "
                "each clock starts",
            },
        )
    finally:
        db.dispose()
