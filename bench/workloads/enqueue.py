"""Workloads 1 and 2: bulk enqueue and single enqueue; plus a raw COPY ceiling on PostgreSQL.

Bulk enqueue times ``enqueue_fanout`` (one call, one transaction; on PostgreSQL it streams
ready COPY lines), the engine's fastest documented path for many jobs of one kind, as the peers
use theirs (pgqueuer's ``enqueue`` of lists). ``bulk_enqueue_builders`` times ``enqueue_many``
of one builder per job (any mix of jobs; builders included, as an application would call it).
Single enqueue times ``JobBuilder(...).insert(db)``: one call and one commit per job.

``bulk_enqueue_copy`` is a ceiling, not a product path: it builds the very rows
``enqueue_many`` would (same validation) before the clock starts and loads them with the
engine's own COPY, so the gap to ``bulk_enqueue`` is what building and validating rows costs
(``enqueue_many`` builds each row while COPY sends the ones before it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.targets import reset
from bench.workloads.common import Context, Measurement, median, percentile, state_counts
from kickside_engine import Database, JobBuilder, enqueue_fanout, enqueue_many
from kickside_engine.clock import utcnow
from kickside_engine.job_row import build_row
from kickside_engine.store.inserts import copy_rows as _copy_rows
from kickside_engine.store.notify import notify_in_transaction

BULK_JOBS = 20_000
SINGLE_JOBS = 2_000
REPEATS = 3


def _builders(n: int) -> list[JobBuilder]:
    return [JobBuilder("noop", {}) for _ in range(n)]


def _throughput_runs(ctx: Context, db: Database, name: str, n: int, load: Any) -> Measurement:
    """Run ``load(n)`` :data:`REPEATS` times on empty tables; report the median jobs/s."""
    runs: list[dict[str, float]] = []
    for attempt in range(REPEATS):
        reset(db)
        ctx.progress(f"{name}: run {attempt + 1}/{REPEATS}, {n} jobs")
        started = time.perf_counter()
        load(n)
        seconds = time.perf_counter() - started
        runs.append({"seconds": seconds, "jobs_per_s": n / seconds})
    counts = state_counts(db)
    return Measurement(
        workload=name,
        backend=ctx.target.backend,
        params={"jobs": n, "repeats": REPEATS},
        metrics={"jobs_per_s": median([r["jobs_per_s"] for r in runs])},
        runs=runs,
        details={"states_after_last_run": counts},
    )


def bulk_enqueue(ctx: Context) -> Measurement:
    """``enqueue_fanout`` of 20,000 no-op jobs in one call: jobs/s, median of 3."""
    return _bulk(
        ctx,
        "bulk_enqueue",
        lambda db, k: enqueue_fanout(db, JobBuilder("noop"), [{} for _ in range(k)]),
    )


def bulk_enqueue_builders(ctx: Context) -> Measurement:
    """``enqueue_many`` of 20,000 no-op job builders in one call: jobs/s, median of 3."""
    return _bulk(ctx, "bulk_enqueue_builders", lambda db, k: enqueue_many(db, _builders(k)))


def _bulk(ctx: Context, name: str, load: Callable[[Database, int], object]) -> Measurement:
    """:func:`_throughput_runs` of ``load(db, n)`` for the bulk size, on a fresh handle."""
    n = ctx.count(BULK_JOBS)
    db = ctx.target.open()
    try:
        return _throughput_runs(ctx, db, name, n, lambda k: load(db, k))
    finally:
        db.dispose()


def single_enqueue(ctx: Context) -> Measurement:
    """2,000 ``insert`` calls, one commit each: jobs/s, and each call's latency."""
    n = ctx.count(SINGLE_JOBS)
    db = ctx.target.open()
    try:
        reset(db)
        ctx.progress(f"single_enqueue: {n} jobs, one commit each")
        calls_ms: list[float] = []
        started = time.perf_counter()
        for _ in range(n):
            before = time.perf_counter()
            JobBuilder("noop", {}).insert(db)
            calls_ms.append((time.perf_counter() - before) * 1000)
        seconds = time.perf_counter() - started
        return Measurement(
            workload="single_enqueue",
            backend=ctx.target.backend,
            params={"jobs": n},
            metrics={
                "jobs_per_s": n / seconds,
                "call_p50_ms": percentile(calls_ms, 50),
                "call_p99_ms": percentile(calls_ms, 99),
            },
            runs=[{"seconds": seconds, "jobs_per_s": n / seconds}],
            details={"states_after_run": state_counts(db)},
        )
    finally:
        db.dispose()


def copy_rows(db: Database, rows: list[dict[str, Any]]) -> None:
    """Load prebuilt job rows with one COPY, the way ``enqueue_many`` streams them, and notify."""
    with db.begin() as conn:
        _copy_rows(db, conn, rows)
        notify_in_transaction(db, conn, "default")


def bulk_enqueue_copy(ctx: Context) -> Measurement:
    """Ceiling: the bulk enqueue's rows, built before the clock starts, loaded with COPY
    (PostgreSQL only): jobs/s, median of 3."""
    n = ctx.count(BULK_JOBS)
    db = ctx.target.open()
    try:
        runs: list[dict[str, float]] = []
        for attempt in range(REPEATS):
            reset(db)
            ctx.progress(f"bulk_enqueue_copy: run {attempt + 1}/{REPEATS}, {n} jobs")
            now = utcnow()
            rows = [build_row(b.options, now) for b in _builders(n)]
            started = time.perf_counter()
            copy_rows(db, rows)
            seconds = time.perf_counter() - started
            runs.append({"seconds": seconds, "jobs_per_s": n / seconds})
            del rows
        return Measurement(
            workload="bulk_enqueue_copy",
            backend=ctx.target.backend,
            params={"jobs": n, "repeats": REPEATS},
            metrics={"jobs_per_s": median([r["jobs_per_s"] for r in runs])},
            runs=runs,
            details={
                "states_after_last_run": state_counts(db),
                "note": "harness-only ceiling: rows built before the clock starts, then the "
                "engine's own COPY; enqueue_many builds and validates each row while it streams",
            },
        )
    finally:
        db.dispose()
