"""Per-bucket metrics from history: throughput, latency percentiles and backlog age, exactly."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

from kickside_engine import Database, JobBuilder, claim, enqueue, record
from kickside_engine.control.metrics import MetricBucket, Percentiles, percentiles, queue_metrics
from kickside_engine.lifecycle import ExecutionResult, ResultKind

#: Buckets of a minute over five minutes end at NOW: 12:01, 12:02, 12:03, 12:04, 12:05 (so far).
NOW = datetime(2026, 1, 1, 12, 5, 30, tzinfo=UTC)
WINDOW = timedelta(minutes=5)


def _at(minute: int, second: float) -> datetime:
    return datetime(2026, 1, 1, 12, minute, tzinfo=UTC) + timedelta(seconds=second)


def _run(
    db: Database,
    queue: str,
    *,
    due: datetime,
    claimed: datetime,
    took_ms: int | None,
    result: ResultKind = ResultKind.DONE,
) -> None:
    """A job due at ``due``, claimed at ``claimed``, and settled ``took_ms`` later (or not)."""
    job = enqueue(db, JobBuilder("w", {}).queue(queue).max_attempts(1), now=due)
    (c,) = claim(db, queue=queue, node="n1", now=claimed)
    assert c.job.id == job.id
    if took_ms is not None:
        finished = claimed + timedelta(milliseconds=took_ms)
        record(db, [(c, ExecutionResult(result, finished, took_ms, error="boom"))])


def _history(db: Database) -> None:
    # Before the window: not counted.
    _run(db, "q", due=_at(0, -90), claimed=_at(0, -80), took_ms=100)
    # 12:01: four runs, each waited 1..4 s and ran 100..400 ms, one at a time.
    for i in range(4):
        due = _at(1, i * 10)
        _run(db, "q", due=due, claimed=due + timedelta(seconds=i + 1), took_ms=100 * (i + 1))
    # Due at 12:02:30, claimed at 12:03:10 (40 s), failed after 500 ms.
    _run(db, "q", due=_at(2, 30), claimed=_at(3, 10), took_ms=500, result=ResultKind.ERROR)
    # Due at 12:03:50, claimed at 12:04:20 (30 s), still executing.
    _run(db, "q", due=_at(3, 50), claimed=_at(4, 20), took_ms=None)
    # Due at 12:05:10 and still available at NOW (20 s).
    enqueue(db, JobBuilder("w", {}).queue("q"), now=_at(5, 10))
    # Another queue: claimed before the window began (12:00:50 after 20 s), finished in it.
    _run(db, "other", due=_at(0, 30), claimed=_at(0, 50), took_ms=30_000)


def test_buckets_hold_exact_percentiles_and_backlog_ages(db: Database) -> None:
    _history(db)
    other, q = queue_metrics(db, NOW, window=WINDOW)
    assert q.queue == "q"
    assert q.buckets == [
        MetricBucket(_at(1, 0), 4, 0, 2000, 4000, 200, 400, 4.0),
        MetricBucket(_at(2, 0), 0, 0, None, None, None, None, 30.0),
        MetricBucket(_at(3, 0), 0, 1, 40_000, 40_000, 500, 500, 40.0),
        MetricBucket(_at(4, 0), 0, 0, None, None, None, None, 30.0),
        MetricBucket(_at(5, 0), 0, 0, None, None, None, None, 20.0),
    ]
    assert q.queue_time == Percentiles(3000, 40_000, 40_000, 5)
    assert q.run_time == Percentiles(300, 500, 500, 5)
    assert (q.backlog, q.backlog_age_seconds) == (1, 20.0)
    assert other.queue == "other"
    assert other.buckets[0] == MetricBucket(_at(1, 0), 1, 0, 20_000, 20_000, 30_000, 30_000)
    assert all(b == MetricBucket(b.start) for b in other.buckets[1:])
    assert other.queue_time == Percentiles(20_000, 20_000, 20_000, 1)
    assert (other.backlog, other.backlog_age_seconds) == (0, None)


def test_a_quiet_window_has_every_bucket_empty(db: Database) -> None:
    _run(db, "q", due=_at(0, -90), claimed=_at(0, -80), took_ms=100)
    assert queue_metrics(db, NOW, window=WINDOW) == []
    enqueue(db, JobBuilder("w", {}).queue("q"), now=_at(3, 30))
    (q,) = queue_metrics(db, NOW, window=WINDOW)
    assert [b.backlog_age_seconds for b in q.buckets] == [None, None, 30.0, 90.0, 120.0]
    assert q.queue_time == Percentiles(None, None, None, 0)


def test_percentiles_take_the_nearest_rank_and_skip_unknown_times(db: Database) -> None:
    for i in range(21):
        due = _at(2, i * 2)
        _run(
            db,
            "q",
            due=due,
            claimed=due + timedelta(milliseconds=10 * (i + 1)),
            took_ms=10 * (i + 1),
        )
    run = db.tables.job_run
    with db.begin() as conn:  # a run whose time is unknown (the 21st) counts in no percentile
        conn.execute(run.update().where(run.c.duration_ms == 210).values(duration_ms=None))
    (q,) = queue_metrics(db, NOW, window=WINDOW)
    bucket = q.buckets[1]
    assert (bucket.completed, bucket.queue_p50_ms, bucket.queue_p95_ms) == (21, 110, 200)
    assert (bucket.run_p50_ms, bucket.run_p95_ms) == (100, 190)
    assert q.run_time == Percentiles(100, 190, 200, 20)
    assert q.queue_time == Percentiles(110, 200, 210, 21)


def test_bucket_percentiles_match_nearest_rank_on_both_databases(db: Database) -> None:
    """Many sizes of bucket, duplicates included: SQL gives what percentiles() gives."""
    rng = random.Random(7)
    job = enqueue(db, JobBuilder("w", {}).queue("q"), now=_at(0, -600))
    rows, expected = [], {}
    for minute, size in zip(range(1, 6), (1, 41, 19, 20, 2), strict=True):
        queued = [float(rng.randint(0, 50)) for _ in range(size)]
        ran = [float(rng.randint(0, 3000)) for _ in range(size)]
        expected[minute] = (percentiles(queued), percentiles(ran))
        for k, (q_ms, r_ms) in enumerate(zip(queued, ran, strict=True)):
            finished = _at(minute, k)
            rows.append(
                {
                    "job_id": job.id,
                    "attempt": 1,
                    "queue": "q",
                    "worker": "w",
                    "node": "n1",
                    "lease_token": uuid.uuid4(),
                    "queue_ms": q_ms,
                    "duration_ms": r_ms,
                    "started_at": finished,
                    "finished_at": finished,
                    "outcome": "completed",
                }
            )
    with db.begin() as conn:
        conn.execute(db.tables.job_run.insert(), rows)
    (q,) = queue_metrics(db, NOW, window=WINDOW)
    for bucket, minute in zip(q.buckets, range(1, 6), strict=True):
        queued, ran = expected[minute]
        assert (bucket.queue_p50_ms, bucket.queue_p95_ms) == (queued.p50, queued.p95)
        assert (bucket.run_p50_ms, bucket.run_p95_ms) == (ran.p50, ran.p95)
    every = [r["queue_ms"] for r in rows]
    assert q.queue_time == percentiles(every)
