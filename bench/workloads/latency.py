"""Workload 4: enqueue-to-start latency on an idle pool.

200 jobs are enqueued one at a time, 20 ms apart. A job's latency runs from the moment the
enqueuing code calls ``insert`` (before its commit) to the moment the worker body begins in
the executor process; both are ``CLOCK_MONOTONIC`` stamps, comparable across processes on one
Linux machine. The latency from the commit (``insert`` returned) is reported beside it.

The details split the median latency into its legs, from the timestamps the engine stores
(``inserted_at`` is taken as ``insert`` builds the row, ``attempted_at`` as the claim begins)
and the worker's wall-clock stamp: the ``insert`` call itself, insert to claim, claim to start.

``latency`` runs the pool in a process of its own, as deployed (on PostgreSQL the wake-up is a
NOTIFY; on SQLite a datagram to the pool's wake socket beside the database file).
``latency_inprocess`` runs it embedded in the enqueuing process, whose inserts wake it directly.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bench.targets import reset
from bench.workloads.common import Context, Measurement, percentile, wait_until
from bench.workloads.pools import CONCURRENCY, InProcessPool
from kickside_engine import Database, JobBuilder

LATENCY_JOBS = 200
LATENCY_MINIMUM = 20
INTERVAL_S = 0.020
SETTLE_S = 1.0


def _stamps(path: Path) -> list[tuple[str, int, int]]:
    """``(job_id, start_monotonic_ns, start_wall_ns)`` per execution, in file order."""
    if not path.exists():
        return []
    stamps = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            stamps.append((parts[0], int(parts[1]), int(parts[2])))
    return stamps


def _legs(db: Database, starts: dict[str, tuple[int, int]]) -> dict[str, float]:
    """Median insert-to-claim and claim-to-start legs, in ms, from the stored timestamps."""
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(select(job.c.id, job.c.inserted_at, job.c.attempted_at)).all()
    to_claim, to_start = [], []
    for row in rows:
        start = starts.get(str(row.id))
        if start is None or row.attempted_at is None:
            continue
        to_claim.append((row.attempted_at - row.inserted_at).total_seconds() * 1000)
        to_start.append(start[1] / 1e6 - row.attempted_at.timestamp() * 1000)
    if not to_claim:
        return {}
    return {
        "insert_to_claim_p50_ms": percentile(to_claim, 50),
        "claim_to_start_p50_ms": percentile(to_start, 50),
    }


def measure_latency(
    ctx: Context, db: Database, name: str, pool: contextlib.AbstractContextManager[Any]
) -> Measurement:
    """Workload ``name``: ``stamp`` jobs enqueued one at a time into ``pool`` (entered here)."""
    n = ctx.count(LATENCY_JOBS, minimum=LATENCY_MINIMUM)
    stamps_file = ctx.workdir / f"{name}-{ctx.target.backend}.stamps"
    stamps_file.unlink(missing_ok=True)
    reset(db)
    sent: dict[str, tuple[int, int]] = {}
    ctx.progress(f"{name}: starting a pool, then {n} jobs {INTERVAL_S * 1000:.0f} ms apart")
    with pool:
        time.sleep(SETTLE_S)  # an idle pool: start-up work (first beats, plugin ticks) is over
        origin = time.monotonic()
        for i in range(n):
            before = time.monotonic_ns()
            inserted = JobBuilder("stamp", {"log": str(stamps_file)}).insert(db)
            sent[str(inserted.id)] = (before, time.monotonic_ns())
            pause = origin + (i + 1) * INTERVAL_S - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        wait_until(
            lambda: len(_stamps(stamps_file)) >= n, timeout_seconds=60, what=f"{n} started jobs"
        )
    first_start: dict[str, tuple[int, int]] = {}
    for job_id, mono_ns, wall_ns in _stamps(stamps_file):
        first_start.setdefault(job_id, (mono_ns, wall_ns))
    from_call = [(first_start[j][0] - sent[j][0]) / 1e6 for j in sent if j in first_start]
    from_commit = [(first_start[j][0] - sent[j][1]) / 1e6 for j in sent if j in first_start]
    calls = [(after - before) / 1e6 for before, after in sent.values()]
    return Measurement(
        workload=name,
        backend=ctx.target.backend,
        params={"jobs": n, "interval_ms": INTERVAL_S * 1000, "concurrency": CONCURRENCY},
        metrics={
            "p50_ms": percentile(from_call, 50),
            "p99_ms": percentile(from_call, 99),
            "mean_ms": sum(from_call) / len(from_call),
            "max_ms": max(from_call),
            "commit_p50_ms": percentile(from_commit, 50),
            "commit_p99_ms": percentile(from_commit, 99),
        },
        details={
            "legs": {"insert_call_p50_ms": percentile(calls, 50), **_legs(db, first_start)},
            "started": len(from_call),
            "executions": len(_stamps(stamps_file)),
            "placement": "same process" if name.endswith("inprocess") else "separate process",
        },
    )


def latency(ctx: Context) -> Measurement:
    """Enqueue-to-start p50/p99 with the pool in a process of its own."""
    db = ctx.target.open()
    try:
        return measure_latency(ctx, db, "latency", ctx.pool())
    finally:
        db.dispose()


def latency_inprocess(ctx: Context) -> Measurement:
    """Enqueue-to-start p50/p99 with the pool embedded in the enqueuing process."""
    db = ctx.target.open()
    try:
        return measure_latency(
            ctx, db, "latency_inprocess", InProcessPool(db, concurrency=CONCURRENCY)
        )
    finally:
        db.dispose()
