"""Throughput, latency percentiles and backlog age per queue and time bucket, from run history.

:func:`kickside_engine.control.metrics.queue_metrics` puts these together. Each statement reads the
runs finished in the window through the ``finished_at`` index, as the throughput always did,
or only the executing jobs (the partial lease index):

- :func:`ranked_runs`: per queue and bucket, completed and failed runs and the nearest-rank
  p50/p95 of queue time and run time; per queue, p50/p95/p99 over the whole window. PostgreSQL
  computes them with ``percentile_disc`` over ``GROUPING SETS``, in one statement; on SQLite,
  which has neither, the window's three numbers per run are read and sorted here. Both give
  exactly the nearest-rank values of :func:`kickside_engine.control.metrics.percentiles`.
- :func:`claimed_waits`: per queue and bucket of the claim, the longest wait and the earliest
  start of the waits that ended with a claim there.
- :func:`backlog_ages`: from those waits and the oldest job still waiting, each bucket's
  backlog age.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Connection, Integer, cast, func, select, tuple_
from sqlalchemy.dialects.postgresql import ARRAY, array

from kickside_engine.models import JobState, RunOutcome
from kickside_engine.store.database import Database
from kickside_engine.store.tables import state_literal

FAILED = (
    RunOutcome.FAILED.value,
    RunOutcome.TIMEOUT.value,
    RunOutcome.CRASHED.value,
    RunOutcome.DISCARDED.value,
)
#: A bucket's figures: completed, failed, queue-time p50/p95 ms, run-time p50/p95 ms.
BucketFigures = tuple[int, int, float | None, float | None, float | None, float | None]
#: Percentiles over the window: p50, p95, p99 (ms) and how many runs had the time.
WindowFigures = tuple[float | None, float | None, float | None, int]
#: A queue's ranked runs: figures per bucket, and queue-time and run-time over the window.
QueueRanks = tuple[dict[int, BucketFigures], tuple[WindowFigures, WindowFigures]]
#: Per bucket, the waits that ended with a claim in it: (longest wait ms, earliest start ms).
Waits = dict[int, tuple[float, float]]

NO_FIGURES: BucketFigures = (0, 0, None, None, None, None)
NO_WINDOW: WindowFigures = (None, None, None, 0)


def bucket_index(db: Database, column: Any, seconds: int) -> Any:
    """The epoch-aligned bucket of ``seconds`` that the timestamp ``column`` falls in."""
    epoch: Any
    if db.is_postgresql:
        # date_part is double precision; EXTRACT's numeric costs twice as much per row.
        epoch = func.date_part("epoch", column)
    else:
        epoch = cast(func.strftime("%s", column), Integer)
    return func.floor(epoch / seconds)


def _epoch_ms(db: Database, column: Any) -> Any:
    if db.is_postgresql:
        return func.date_part("epoch", column) * 1000
    return (func.julianday(column) - 2440587.5) * 86_400_000.0


def _ms(value: Any) -> float | None:
    return None if value is None else float(value)


def _window(values: Sequence[Any], n: Any) -> WindowFigures:
    """p50, p95 and p99 from ``values`` (None: no run had the time), and their count."""
    p50, p95, p99 = values or (None, None, None)
    return (_ms(p50), _ms(p95), _ms(p99), int(n or 0))


def _outcome_counts(run: Any) -> list[Any]:
    return [
        func.sum(cast(run.c.outcome == RunOutcome.COMPLETED.value, Integer)),
        func.sum(cast(run.c.outcome.in_(FAILED), Integer)),
    ]


def ranked_runs(
    db: Database, conn: Connection, since: datetime, now: datetime, seconds: int
) -> dict[str, QueueRanks]:
    """Throughput and percentiles of the runs finished in ``[since, now]``, per queue and
    bucket, and per queue over the whole window."""
    if db.is_postgresql:
        return _ranked_postgresql(db, conn, since, now, seconds)
    return _ranked_in_python(db, conn, since, now, seconds)


def _ranked_postgresql(
    db: Database, conn: Connection, since: datetime, now: datetime, seconds: int
) -> dict[str, QueueRanks]:
    run = db.tables.job_run
    b = bucket_index(db, run.c.finished_at, seconds)
    fractions = array([0.5, 0.95, 0.99])

    def disc(column: Any) -> Any:
        return func.percentile_disc(fractions).within_group(column).cast(ARRAY(BigInteger))

    stmt = (
        select(
            run.c.queue,
            b,
            *_outcome_counts(run),
            disc(run.c.queue_ms),
            disc(run.c.duration_ms),
            func.count(run.c.queue_ms),
            func.count(run.c.duration_ms),
        )
        .where(run.c.finished_at >= since, run.c.finished_at <= now)
        .group_by(func.grouping_sets(tuple_(run.c.queue, b), tuple_(run.c.queue)))
    )
    per_bucket: dict[str, dict[int, BucketFigures]] = defaultdict(dict)
    overall: dict[str, tuple[WindowFigures, WindowFigures]] = {}
    rows: Any = conn.execute(stmt)
    for q, i, done, bad, queue_ms, run_ms, queue_n, run_n in rows:
        if i is None:  # the queue's grouping set: the whole window
            overall[q] = (_window(queue_ms, queue_n), _window(run_ms, run_n))
        else:
            qs, rs = queue_ms or (None, None), run_ms or (None, None)
            ms = (_ms(qs[0]), _ms(qs[1]), _ms(rs[0]), _ms(rs[1]))
            per_bucket[q][int(i)] = (int(done or 0), int(bad or 0), *ms)
    return {q: (per_bucket[q], overall[q]) for q in overall}


def _nearest(ordered: list[float], percent: int) -> float | None:
    """The nearest-rank ``percent`` percentile of ``ordered`` (sorted), None when empty."""
    if not ordered:
        return None
    return ordered[max(0, -(-len(ordered) * percent // 100) - 1)]


def _ranked_in_python(
    db: Database, conn: Connection, since: datetime, now: datetime, seconds: int
) -> dict[str, QueueRanks]:
    """SQLite has no percentile aggregate and ranks with window functions slowly (a sort per
    ranking); reading the window's times and sorting them here costs a tenth of that."""
    run = db.tables.job_run
    b = bucket_index(db, run.c.finished_at, seconds)
    stmt = select(run.c.queue, b, run.c.outcome, run.c.queue_ms, run.c.duration_ms).where(
        run.c.finished_at >= since, run.c.finished_at <= now
    )
    counts: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    times: dict[str, dict[int, tuple[list[float], list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: ([], []))
    )
    for q, i, outcome, queue_ms, duration_ms in conn.execute(stmt):
        i = int(i)
        if outcome == RunOutcome.COMPLETED.value:
            counts[q][i][0] += 1
        elif outcome in FAILED:
            counts[q][i][1] += 1
        queued, ran = times[q][i]
        if queue_ms is not None:
            queued.append(float(queue_ms))
        if duration_ms is not None:
            ran.append(float(duration_ms))
    result: dict[str, QueueRanks] = {}
    for q, per in times.items():
        per_bucket: dict[int, BucketFigures] = {}
        for i, (queued, ran) in per.items():
            queued.sort()
            ran.sort()
            done, bad = counts[q][i]
            per_bucket[i] = (
                done,
                bad,
                _nearest(queued, 50),
                _nearest(queued, 95),
                _nearest(ran, 50),
                _nearest(ran, 95),
            )
        queued, ran = (sorted(v for pair in per.values() for v in pair[k]) for k in (0, 1))
        result[q] = (per_bucket, (_over_window(queued), _over_window(ran)))
    return result


def _over_window(ordered: list[float]) -> WindowFigures:
    return (_nearest(ordered, 50), _nearest(ordered, 95), _nearest(ordered, 99), len(ordered))


def claimed_waits(
    db: Database, conn: Connection, since: datetime, now: datetime, seconds: int
) -> dict[str, Waits]:
    """Per queue and bucket, the waits that ended with a claim in ``[since, now]``.

    Settled runs carry their wait (``started_at - queue_ms`` to ``started_at``); they are read
    through the ``finished_at`` index, since a run that started in the window finished in it.
    Runs still open are the executing jobs' (``scheduled_at`` to ``attempted_at``), read
    through the partial lease index.
    """
    run, job = db.tables.job_run, db.tables.job
    b = bucket_index(db, run.c.started_at, seconds)
    first = math.floor(since.timestamp() / seconds)
    found: dict[str, Waits] = defaultdict(dict)
    settled = (
        select(
            run.c.queue,
            b,
            func.max(run.c.queue_ms),
            func.min(_epoch_ms(db, run.c.started_at) - run.c.queue_ms),
        )
        # Runs that started before the window are dropped below, not here: a filter on
        # started_at misleads PostgreSQL's estimate into sorting instead of hashing.
        .where(run.c.finished_at >= since, run.c.finished_at <= now, run.c.queue_ms.is_not(None))
        .group_by(run.c.queue, b)
    )
    for q, i, longest, earliest in conn.execute(settled):
        if int(i) >= first:
            # Whole milliseconds: SQLite's julianday() is a float some microseconds off.
            found[q][int(i)] = (float(longest), float(round(earliest)))
    executing = select(job.c.queue, job.c.scheduled_at, job.c.attempted_at).where(
        job.c.state == state_literal(JobState.EXECUTING),
        job.c.attempted_at >= since,
        job.c.attempted_at <= now,
    )
    for q, scheduled_at, attempted_at in conn.execute(executing):
        ended = attempted_at.timestamp() * 1000
        began = min(scheduled_at.timestamp() * 1000, ended)
        i = math.floor(attempted_at.timestamp() / seconds)
        longest, earliest = found[q].get(i, (0.0, math.inf))
        found[q][i] = (max(longest, ended - began), min(earliest, began))
    return found


def backlog_ages(
    buckets: range, seconds: int, now: datetime, waits: Waits, waiting_since: datetime | None
) -> list[float | None]:
    """Each bucket's backlog age in seconds, oldest first (see
    :class:`~kickside_engine.control.metrics.MetricBucket`).

    ``waits`` are the waits that ended with a claim, per bucket; ``waiting_since`` is when the
    oldest job still available became due. A wait that ended in a later bucket, or has not
    ended, counts in a bucket up to the bucket's end (``now`` for the last one).
    """
    now_ms = now.timestamp() * 1000
    # The earliest start among the waits still going on at the end of the bucket looked at.
    earliest = math.inf if waiting_since is None else waiting_since.timestamp() * 1000
    ages: list[float | None] = []
    for i in reversed(buckets):
        end_ms = min((i + 1) * seconds * 1000, now_ms)
        longest, began = waits.get(i, (None, math.inf))
        candidates = [] if longest is None else [longest]
        if earliest < end_ms:
            candidates.append(end_ms - earliest)
        ages.append(max(candidates) / 1000 if candidates else None)
        earliest = min(earliest, began)
    ages.reverse()
    return ages
