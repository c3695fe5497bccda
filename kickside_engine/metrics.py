"""Metrics computed from history, so the dashboard needs no metrics service.

Throughput per minute comes from ``kickside_job_run.finished_at`` (indexed) aggregated in SQL;
queue-time and run-time percentiles from the most recent runs (bounded), and backlog from the
fetch index. Every query is bounded by the time window or a row limit.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Integer, cast, func, select

from kickside_engine.clock import ensure_aware
from kickside_engine.control import list_nodes, queue_infos
from kickside_engine.models import JobState, RunOutcome
from kickside_engine.store.database import Database
from kickside_engine.store.tables import state_literal

PERCENTILE_SAMPLE = 2_000
FAILED = (
    RunOutcome.FAILED.value,
    RunOutcome.TIMEOUT.value,
    RunOutcome.CRASHED.value,
    RunOutcome.DISCARDED.value,
)


@dataclass(frozen=True)
class MetricBucket:
    """Runs that finished in ``[start, start + bucket)``."""

    start: datetime
    completed: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Percentiles:
    """p50/p95/p99 in milliseconds over ``samples`` runs (None without samples)."""

    p50: float | None
    p95: float | None
    p99: float | None
    samples: int


@dataclass(frozen=True)
class QueueMetrics:
    """One queue's recent history."""

    queue: str
    buckets: list[MetricBucket]
    queue_time: Percentiles
    run_time: Percentiles
    backlog: int
    backlog_age_seconds: float | None


@dataclass(frozen=True)
class Overview:
    """The numbers of the dashboard's first screen."""

    at: datetime
    counts: dict[str, dict[JobState, int]]
    totals: dict[JobState, int]
    nodes_alive: int
    nodes_stale: int
    completed_last_minute: int
    failed_last_minute: int
    expired_leases: int
    queues_without_node: list[str] = field(default_factory=list)
    paused_queues: list[str] = field(default_factory=list)
    #: Per queue, the states whose count is an estimate (only with ``exact=False``).
    approximate: dict[str, frozenset[JobState]] = field(default_factory=dict)


def _bucket_index(db: Database, column: Any, seconds: int) -> Any:
    epoch: Any
    if db.is_postgresql:
        epoch = func.extract("epoch", column)
    else:
        epoch = cast(func.strftime("%s", column), Integer)
    return func.floor(epoch / seconds)


def percentiles(values: list[float]) -> Percentiles:
    """Nearest-rank percentiles of ``values``."""
    if not values:
        return Percentiles(None, None, None, 0)
    ordered = sorted(values)

    def rank(p: float) -> float:
        return ordered[max(0, math.ceil(p * len(ordered)) - 1)]

    return Percentiles(rank(0.50), rank(0.95), rank(0.99), len(ordered))


def throughput(
    db: Database,
    now: datetime,
    *,
    window: timedelta = timedelta(minutes=15),
    bucket: timedelta = timedelta(minutes=1),
    queue: str | None = None,
    by: Literal["queue", "worker"] = "queue",
) -> dict[str, list[MetricBucket]]:
    """Completed and failed runs per bucket over ``window``, per queue or per worker.

    Every bucket of the window is present, empty ones with zeros.
    """
    now = ensure_aware(now, "now")
    seconds = max(1, int(bucket.total_seconds()))
    run = db.tables.job_run
    key = run.c.worker if by == "worker" else run.c.queue
    index = _bucket_index(db, run.c.finished_at, seconds)
    failed = func.sum(func.cast(run.c.outcome.in_(FAILED), Integer))
    completed = func.sum(func.cast(run.c.outcome == RunOutcome.COMPLETED.value, Integer))
    stmt = (
        select(key, index.label("b"), completed, failed)
        .where(run.c.finished_at >= now - window, run.c.finished_at <= now)
        .group_by(key, index)
    )
    if queue is not None:
        stmt = stmt.where(run.c.queue == queue)
    first = math.floor((now - window).timestamp() / seconds) + 1
    last = math.floor(now.timestamp() / seconds)
    found: dict[str, dict[int, tuple[int, int]]] = defaultdict(dict)
    with db.read() as conn:
        for q, b, done, bad in conn.execute(stmt):
            found[q][int(b)] = (int(done or 0), int(bad or 0))
    return {
        q: [
            MetricBucket(datetime.fromtimestamp(i * seconds, UTC), *per.get(i, (0, 0)))
            for i in range(first, last + 1)
        ]
        for q, per in found.items()
    }


def queue_metrics(
    db: Database,
    now: datetime,
    *,
    window: timedelta = timedelta(minutes=15),
    bucket: timedelta = timedelta(minutes=1),
) -> list[QueueMetrics]:
    """Throughput buckets, queue/run-time percentiles and backlog per queue."""
    now = ensure_aware(now, "now")
    buckets = throughput(db, now, window=window, bucket=bucket)
    run = db.tables.job_run
    job = db.tables.job
    samples: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    with db.read() as conn:
        recent = conn.execute(
            select(run.c.queue, run.c.queue_ms, run.c.duration_ms)
            .where(run.c.finished_at >= now - window)
            .order_by(run.c.finished_at.desc())
            .limit(PERCENTILE_SAMPLE)
        )
        for q, queue_ms, duration_ms in recent:
            if queue_ms is not None:
                samples[q][0].append(float(queue_ms))
            if duration_ms is not None:
                samples[q][1].append(float(duration_ms))
        backlog = {
            q: (n, oldest)
            for q, n, oldest in conn.execute(
                select(job.c.queue, func.count(), func.min(job.c.scheduled_at))
                .where(job.c.state == JobState.AVAILABLE.value, job.c.scheduled_at <= now)
                .group_by(job.c.queue)
            )
        }
    empty_buckets = next(iter(buckets.values()), [])
    queues = sorted(set(buckets) | set(samples) | set(backlog))
    result = []
    for q in queues:
        n, oldest = backlog.get(q, (0, None))
        if isinstance(oldest, str):  # SQLite aggregates lose the column type
            oldest = datetime.fromisoformat(oldest).replace(tzinfo=UTC)
        result.append(
            QueueMetrics(
                queue=q,
                buckets=buckets.get(q) or [MetricBucket(b.start) for b in empty_buckets],
                queue_time=percentiles(samples[q][0]),
                run_time=percentiles(samples[q][1]),
                backlog=n,
                backlog_age_seconds=(now - oldest).total_seconds() if oldest else None,
            )
        )
    return result


def overview(db: Database, now: datetime, *, exact: bool = True) -> Overview:
    """Counts per queue and state, nodes, the last minute's throughput, and stuck work.

    ``exact=False`` keeps it fast on a big history: large counts of completed, cancelled and
    discarded jobs are then estimates, named in :attr:`Overview.approximate`.
    """
    now = ensure_aware(now, "now")
    job = db.tables.job
    run = db.tables.job_run
    with db.read() as conn:
        infos = queue_infos(conn, db, now, exact=exact)
        last_minute = conn.execute(
            select(
                func.sum(func.cast(run.c.outcome == RunOutcome.COMPLETED.value, Integer)),
                func.sum(func.cast(run.c.outcome.in_(FAILED), Integer)),
            ).where(run.c.finished_at >= now - timedelta(minutes=1))
        ).one()
        expired = conn.execute(
            select(func.count())
            .select_from(job)
            .where(job.c.state == state_literal(JobState.EXECUTING), job.c.lease_expires_at < now)
        ).scalar_one()
    nodes = list_nodes(db, now)
    totals = {state: sum(i.counts[state] for i in infos) for state in JobState}
    return Overview(
        at=now,
        counts={i.name: i.counts for i in infos},
        totals=totals,
        nodes_alive=sum(1 for n in nodes if not n.stale),
        nodes_stale=sum(1 for n in nodes if n.stale),
        completed_last_minute=int(last_minute[0] or 0),
        failed_last_minute=int(last_minute[1] or 0),
        expired_leases=int(expired),
        queues_without_node=[i.name for i in infos if i.no_node],
        paused_queues=[i.name for i in infos if i.paused],
        approximate={i.name: i.approximate for i in infos if i.approximate},
    )
