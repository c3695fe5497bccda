"""Metrics computed from history, so the dashboard needs no metrics service.

Throughput comes from ``kickside_job_run.finished_at`` (indexed) aggregated in SQL, and so do
the queue-time and run-time percentiles and the backlog age per bucket
(:mod:`kickside_engine.control.latency`); the backlog now comes from the fetch index. Every query is
bounded by the time window or reads only the available or executing jobs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import Connection, Integer, func, select

from kickside_engine.clock import ensure_aware
from kickside_engine.control.latency import (
    FAILED,
    NO_FIGURES,
    NO_WINDOW,
    backlog_ages,
    bucket_index,
    claimed_waits,
    ranked_runs,
)
from kickside_engine.control.queues import list_nodes, queue_infos
from kickside_engine.models import JobState, RunOutcome
from kickside_engine.store.database import Database
from kickside_engine.store.tables import state_literal


@dataclass(frozen=True)
class MetricBucket:
    """One bucket ``[start, start + bucket)`` of a queue's (or a worker's) history.

    ``completed`` and ``failed`` count the runs that finished in it. The other fields are
    filled by :func:`queue_metrics` only (:func:`throughput` leaves them None):

    - ``queue_p50_ms`` ... ``run_p95_ms``: nearest-rank percentiles of the queue time (due to
      claimed) and run time of the runs that finished in the bucket; None when none did.
    - ``backlog_age_seconds``: how long the longest-waiting due job of the queue had waited at
      any moment of the bucket: the longest wait that ended with a claim in it, or, for a job
      still waiting at the bucket's end (claimed later, or available now), its wait by then.
      None when no job waited in the bucket. Waits that ended without a claim (a job cancelled
      or discarded while available) are not in the history and are not counted.
    """

    start: datetime
    completed: int = 0
    failed: int = 0
    queue_p50_ms: float | None = None
    queue_p95_ms: float | None = None
    run_p50_ms: float | None = None
    run_p95_ms: float | None = None
    backlog_age_seconds: float | None = None


@dataclass(frozen=True)
class Percentiles:
    """Nearest-rank p50/p95/p99 in milliseconds over ``samples`` runs (None without samples)."""

    p50: float | None
    p95: float | None
    p99: float | None
    samples: int


@dataclass(frozen=True)
class QueueMetrics:
    """One queue's recent history: a bucket per step of the window (oldest first), the
    percentiles over the whole window, and the backlog now (its oldest job's age)."""

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
    index = bucket_index(db, run.c.finished_at, seconds)
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
    """Per queue: buckets of throughput, latency percentiles and backlog age over ``window``,
    the percentiles over the whole window, and the backlog now.

    Buckets are aligned on the epoch; the last one is the bucket ``now`` falls in (so far).
    The cost grows with the runs finished in the window, as for :func:`throughput`.
    """
    now = ensure_aware(now, "now")
    seconds = max(1, int(bucket.total_seconds()))
    first = math.floor((now - window).timestamp() / seconds) + 1
    last = math.floor(now.timestamp() / seconds)
    since = datetime.fromtimestamp(first * seconds, UTC)
    with db.read() as conn:
        ranked = ranked_runs(db, conn, since, now, seconds)
        waits = claimed_waits(db, conn, since, now, seconds)
        backlog = _backlog(db, conn, now)
    result = []
    for q in sorted(set(ranked) | set(waits) | set(backlog)):
        per_bucket, (queue_time, run_time) = ranked.get(q, ({}, (NO_WINDOW, NO_WINDOW)))
        n, oldest = backlog.get(q, (0, None))
        ages = backlog_ages(range(first, last + 1), seconds, now, waits.get(q, {}), oldest)
        buckets = []
        for i, age in zip(range(first, last + 1), ages, strict=True):
            done, bad, q50, q95, r50, r95 = per_bucket.get(i, NO_FIGURES)
            start = datetime.fromtimestamp(i * seconds, UTC)
            buckets.append(MetricBucket(start, done, bad, q50, q95, r50, r95, age))
        result.append(
            QueueMetrics(
                queue=q,
                buckets=buckets,
                queue_time=Percentiles(*queue_time),
                run_time=Percentiles(*run_time),
                backlog=n,
                backlog_age_seconds=(now - oldest).total_seconds() if oldest else None,
            )
        )
    return result


def _backlog(
    db: Database, conn: Connection, now: datetime
) -> dict[str, tuple[int, datetime | None]]:
    """Per queue: how many jobs are available and due at ``now``, and the oldest one's due time."""
    job = db.tables.job
    return {
        q: (n, _aware(oldest))
        for q, n, oldest in conn.execute(
            select(job.c.queue, func.count(), func.min(job.c.scheduled_at))
            .where(job.c.state == JobState.AVAILABLE.value, job.c.scheduled_at <= now)
            .group_by(job.c.queue)
        )
    }


def queue_backlog(db: Database, now: datetime) -> dict[str, tuple[int, float]]:
    """Per queue with due jobs waiting: how many, and how long the oldest has waited (seconds).

    One grouped read of the available jobs (the index of claims serves it), cheap enough for
    a metrics scrape.
    """
    now = ensure_aware(now, "now")
    with db.read() as conn:
        found = _backlog(db, conn, now)
    return {
        q: (n, max(0.0, (now - oldest).total_seconds()) if oldest else 0.0)
        for q, (n, oldest) in found.items()
    }


def _aware(value: datetime | str | None) -> datetime | None:
    """A timestamp from an aggregate (SQLite's lose the column type)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value is not None and value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value


def overview(db: Database, now: datetime, *, exact: bool = True) -> Overview:
    """Counts per queue and state, nodes, the last minute's throughput, and stuck work.

    ``exact=False`` keeps it fast on a big history: large counts of completed, cancelled and
    discarded jobs are then estimates, named in :attr:`Overview.approximate`.
    """
    now = ensure_aware(now, "now")
    job = db.tables.job
    run = db.tables.job_run
    with db.read() as conn:
        infos = queue_infos(db, conn, now, exact=exact)
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
