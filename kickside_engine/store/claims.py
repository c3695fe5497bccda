"""Claiming due jobs under a lease, renewing leases, and starting run history.

A claim moves due ``available`` jobs of one queue to ``executing`` in (priority, scheduled_at,
id) order, with ``attempt + 1``, the lease owner (node), a fresh fencing token and the lease
expiry, and opens one ``kickside_job_run`` row per job, all in one transaction.

PostgreSQL locks candidate rows with ``FOR UPDATE SKIP LOCKED``, so concurrent claimers on many
machines never wait on each other nor take the same job; SQLite serialises writers, and the
claim is one short ``BEGIN IMMEDIATE`` transaction.

Jobs with a ``concurrency_key`` are claimed by :mod:`kickside_engine.store.keyed_claims`, which
enforces single-flight per key and capacity groups.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    String,
    and_,
    cast,
    func,
    insert,
    literal,
    select,
    update,
)

from kickside_engine.models import ClaimedJob, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.rows import job_from_row
from kickside_engine.store.types import UTCDateTime

DEFAULT_LEASE = timedelta(seconds=30)


def fresh_token_sql(db: Database) -> Any:
    """A SQL expression yielding a new random UUID for each row (the lease's fencing token)."""
    if db.is_postgresql:
        return func.gen_random_uuid()
    return func.lower(func.hex(func.randomblob(16)))


def claim_jobs(
    db: Database,
    conn: Connection,
    *,
    queue: str,
    node: str,
    limit: int,
    now: datetime,
    lease: timedelta = DEFAULT_LEASE,
    code_version: str | None = None,
    keyless_only: bool = True,
    job_ids: Sequence[uuid.UUID] | None = None,
) -> list[ClaimedJob]:
    """Claim up to ``limit`` due jobs of ``queue`` through ``conn`` (inside its transaction).

    With ``job_ids`` only those jobs are candidates (used after admission checks).
    """
    if limit <= 0:
        return []
    job = db.tables.job
    candidates = (
        select(job.c.id)
        .where(
            job.c.state == JobState.AVAILABLE.value,
            job.c.queue == queue,
            job.c.scheduled_at <= now,
        )
        .order_by(job.c.priority, job.c.scheduled_at, job.c.id)
        .limit(limit)
    )
    if keyless_only:
        candidates = candidates.where(job.c.concurrency_key.is_(None))
    if job_ids is not None:
        candidates = candidates.where(job.c.id.in_(list(job_ids)))
    if db.is_postgresql:
        candidates = candidates.with_for_update(skip_locked=True)
    # Materialised, so PostgreSQL runs the locking subquery once: as a plain IN (subquery) it
    # may be re-run per outer row, and claim more than ``limit`` jobs.
    chosen = candidates.cte("candidates").prefix_with("MATERIALIZED", dialect="postgresql")
    expires = now + lease
    stmt = update(job).where(job.c.id.in_(select(chosen.c.id)))
    if not db.is_postgresql:
        # PostgreSQL holds the candidates' row locks; repeating the state test there only
        # tempts the planner into scanning every available job instead of the primary key.
        stmt = stmt.where(job.c.state == JobState.AVAILABLE.value)
    stmt = stmt.values(
        state=JobState.EXECUTING.value,
        attempt=job.c.attempt + 1,
        attempted_at=now,
        lease_owner=node,
        lease_token=fresh_token_sql(db),
        lease_expires_at=expires,
        # A claim consumes the slot demand present now; demand arriving later re-arms it.
        demand_pending=False,
        control_pending=False,
        updated_at=now,
    ).returning(*job.c)
    if db.is_postgresql:
        rows = conn.execute(_with_runs(db, stmt, node, now, code_version)).all()
    else:
        rows = conn.execute(stmt).all()
    if not rows:
        return []
    claimed = [
        ClaimedJob(job=j, node=node, lease_token=j.lease_token, lease_expires_at=expires)  # type: ignore[arg-type]
        for j in (job_from_row(r) for r in rows)
    ]
    claimed.sort(key=lambda c: (c.job.priority, c.job.scheduled_at, c.job.id))
    if not db.is_postgresql:
        start_runs(db, conn, claimed, now=now, code_version=code_version)
    return claimed


def _with_runs(db: Database, claim: Any, node: str, now: datetime, code_version: str | None) -> Any:
    """One PostgreSQL statement that claims and opens the runs (a data-modifying CTE)."""
    run = db.tables.job_run
    claimed = claim.cte("claimed")
    queue_ms = cast(
        func.greatest(0, func.extract("epoch", literal(now) - claimed.c.scheduled_at) * 1000),
        BigInteger,
    )
    runs = (
        insert(run)
        .from_select(
            [
                "job_id",
                "attempt",
                "queue",
                "worker",
                "node",
                "lease_token",
                "code_version",
                "queue_ms",
                "started_at",
            ],
            select(
                claimed.c.id,
                claimed.c.attempt,
                claimed.c.queue,
                claimed.c.worker,
                literal(node, String),
                claimed.c.lease_token,
                literal(code_version, String),
                queue_ms,
                literal(now, UTCDateTime),
            ),
        )
        .cte("runs")
    )
    return select(claimed).add_cte(runs)


def start_runs(
    db: Database,
    conn: Connection,
    claimed: Sequence[ClaimedJob],
    *,
    now: datetime,
    code_version: str | None,
) -> None:
    """Open one run-history row per claimed job."""
    conn.execute(
        insert(db.tables.job_run),
        [
            {
                "job_id": c.job.id,
                "attempt": c.job.attempt,
                "queue": c.job.queue,
                "worker": c.job.worker,
                "node": c.node,
                "lease_token": c.lease_token,
                "code_version": code_version,
                "queue_ms": max(0, int((now - c.job.scheduled_at) / timedelta(milliseconds=1))),
                "started_at": now,
            }
            for c in claimed
        ],
    )


def renew_leases(
    db: Database,
    *,
    node: str,
    tokens: Sequence[uuid.UUID],
    now: datetime,
    lease: timedelta = DEFAULT_LEASE,
) -> set[uuid.UUID]:
    """Extend the leases this node still holds; returns the tokens that are still held.

    A token missing from the result lost its lease (rescued, cancelled or finished elsewhere):
    its execution must stop, since another node may now run the job.
    """
    if not tokens:
        return set()
    job = db.tables.job
    held: set[uuid.UUID] = set()
    with db.begin() as conn:
        for start in range(0, len(tokens), 500):
            chunk = list(tokens[start : start + 500])
            result = conn.execute(
                update(job)
                .where(
                    and_(
                        job.c.state == JobState.EXECUTING.value,
                        job.c.lease_owner == node,
                        job.c.lease_token.in_(chunk),
                    )
                )
                .values(lease_expires_at=now + lease, updated_at=now)
                .returning(job.c.lease_token)
            )
            held.update(r[0] for r in result)
    return held
