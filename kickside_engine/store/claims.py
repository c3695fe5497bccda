"""Claiming due jobs under a lease, renewing leases, and starting run history.

A claim moves due ``available`` jobs of one queue to ``executing`` in (priority, scheduled_at,
id) order, with ``attempt + 1``, the lease owner (node), a fresh fencing token and the lease
expiry, and opens one ``kickside_job_run`` row per job, all in one transaction.

PostgreSQL locks candidate rows with ``FOR UPDATE SKIP LOCKED``, so concurrent claimers on many
machines never wait on each other nor take the same job; SQLite serialises writers, and the
claim is one short ``BEGIN IMMEDIATE`` transaction.

One order holds across every kind of job: a claim that skips keyed jobs (the pool's fast path,
``keyless_only``) takes only the keyless jobs among the first ``limit`` due jobs, so a keyed job
ahead of them keeps its place; :mod:`kickside_engine.store.keyed_claims` then admits keyed and
keyless jobs together, in the same order, within their concurrency keys and capacity groups.

A claim given ``workers`` takes only jobs of those workers: a pool never claims a job it cannot
run (during a rolling deploy, old pools leave new job types to the pools that have them).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    ColumnElement,
    Connection,
    Dialect,
    Integer,
    String,
    Uuid,
    and_,
    bindparam,
    cast,
    func,
    insert,
    select,
    update,
)

from kickside_engine.models import ClaimedJob, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.rows import job_from_driver_row, job_from_row
from kickside_engine.store.settle import UnnestSettle
from kickside_engine.store.tables import Tables, state_literal
from kickside_engine.store.types import UTCDateTime, as_utc

DEFAULT_LEASE = timedelta(seconds=30)


def open_turn_connection(db: Database) -> Connection:
    """An autocommit PostgreSQL connection for a pool's turns (claims riding with settles).

    Its session never plans a sequential scan where an index can answer. psycopg prepares a
    statement from its fifth run, and PostgreSQL then keeps one generic plan, costed against the
    table sizes of that moment: a pool started on an empty run table kept a plan that settled
    each batch by reading every run, a cost that grew with the history (20 % of PostgreSQL's
    time per job over a 20,000-job drain) until an ANALYZE happened to replan it. Every turn
    statement looks rows up by key, so an index is always the right plan.
    """
    conn = db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    try:
        conn.exec_driver_sql("SET enable_seqscan = off")
    except BaseException:
        conn.invalidate()
        conn.close()
        raise
    return conn


def close_turn_connection(conn: Connection) -> None:
    """Give a connection from :func:`open_turn_connection` back to the engine's pool with its
    planner setting undone (or discard it, when that fails)."""
    try:
        conn.exec_driver_sql("RESET enable_seqscan")
    except Exception:
        with contextlib.suppress(Exception):
            conn.invalidate()
    with contextlib.suppress(Exception):
        conn.close()


def fresh_token_sql(dialect: str) -> Any:
    """A SQL expression yielding a new random UUID for each row (the lease's fencing token)."""
    if dialect == "postgresql":
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
    settle: UnnestSettle | None = None,
    workers: Sequence[str] | None = None,
) -> list[ClaimedJob]:
    """Claim up to ``limit`` due jobs of ``queue`` through ``conn`` (inside its transaction).

    ``keyless_only``: claim the jobs without a concurrency key among the first ``limit`` due
    jobs in claim order (a keyed job among them is left for the admission path, and keeps its
    place ahead of the keyless jobs after it). With ``job_ids`` only those jobs are candidates
    (used after admission checks). ``workers``: only jobs of these workers. ``settle``
    (PostgreSQL) records a batch of outcomes in the same statement: the supervisor's whole
    turn in one round trip and one commit, on an autocommit connection.
    """
    if limit <= 0 and settle is None:
        return []
    now = as_utc(now)  # what UTCDateTime would send: the PostgreSQL claim bypasses it
    expires = now + lease
    params = {
        "p_queue": queue,
        "p_now": now,
        "p_limit": limit,
        "p_node": node,
        "p_expires": expires,
        "p_code_version": code_version,
    }
    by_worker = workers is not None
    if by_worker:
        params["p_workers"] = list(workers or ())
    if settle is not None:
        assert job_ids is None and db.is_postgresql
        stmt = _claim_and_settle_statement(db.tables, keyless_only, by_worker, *settle.ctes(db))
        params.update(settle.params)
    else:
        by_id = job_ids is not None
        if by_id:
            params["p_ids"] = list(job_ids or ())
        stmt = _claim_statement(db.tables, db.dialect, keyless_only, by_worker, by_id)
    if db.is_postgresql and job_ids is None:
        sql, constants = _driver_statement(stmt, db.tables, db.engine.dialect)
        jobs = [job_from_driver_row(r) for r in conn.exec_driver_sql(sql, {**constants, **params})]
    else:
        jobs = [job_from_row(r) for r in conn.execute(stmt, params)]
    if not jobs:
        return []
    claimed = [
        ClaimedJob(job=j, node=node, lease_token=j.lease_token, lease_expires_at=expires)  # type: ignore[arg-type]
        for j in jobs
    ]
    claimed.sort(key=lambda c: (c.job.priority, c.job.scheduled_at, c.job.id))
    if db.dialect != "postgresql":
        start_runs(db, conn, claimed, now=now, code_version=code_version)
    return claimed


@lru_cache(maxsize=64)
def _claim_statement(
    tables: Tables, dialect: str, keyless_only: bool, by_worker: bool, by_id: bool = False
) -> Any:
    """The claim statement, built once per schema: building it costs more than running it."""
    return _build_claim(tables, dialect, keyless_only, by_id, by_worker)


@lru_cache(maxsize=64)
def _driver_statement(stmt: Any, tables: Tables, dialect: Dialect) -> tuple[str, dict[str, Any]]:
    """A cached PostgreSQL claim as psycopg runs it: its SQL, and the values of the constants
    SQLAlchemy made parameters of. Run this way the rows come back as psycopg loads them,
    for :func:`job_from_driver_row` (so the statement must return every job column in order).

    The claim's own parameters need no SQLAlchemy processing either: :func:`claim_jobs` makes
    its instants aware UTC datetimes, as ``UTCDateTime`` would send them.
    """
    returned = [c.name for c in stmt.selected_columns]
    if returned != list(tables.job.columns.keys()):
        raise AssertionError(f"a claim must return every job column in order, not {returned}")
    compiled = stmt.compile(dialect=dialect)
    return str(compiled), dict(compiled.params)


@lru_cache(maxsize=64)
def _claim_and_settle_statement(
    tables: Tables, keyless_only: bool, by_worker: bool, settled_jobs: Any, settled_runs: Any
) -> Any:
    """The PostgreSQL claim with a batch settle riding along as data-modifying CTEs.

    They touch other rows than the claim (executing jobs of this node, their open runs), and
    PostgreSQL runs every data-modifying CTE whether or not the query reads it.
    """
    claim = _claim_statement(tables, "postgresql", keyless_only, by_worker, False)
    return claim.add_cte(settled_jobs, settled_runs)


def worker_filter(column: Any, dialect: str) -> ColumnElement[bool]:
    """``column`` is one of the ``p_workers`` parameter's names (one array parameter on
    PostgreSQL, so the statement text does not change with the number of workers)."""
    matches: ColumnElement[bool]
    if dialect == "postgresql":
        matches = column == func.any(bindparam("p_workers", type_=ARRAY(String)))
    else:
        matches = column.in_(bindparam("p_workers", expanding=True))
    return matches


def _build_claim(
    tables: Tables,
    dialect: str,
    keyless_only: bool,
    by_id: bool,
    by_worker: bool,
) -> Any:
    job: Any = tables.job
    src: Any = tables.job
    if dialect == "postgresql":
        # Short aliases keep the statement under psycopg's 4 KB limit for caching its parse
        # (every column is named twice, and schema-qualified names are long).
        job, src = tables.job.alias("j"), tables.job.alias("c")
    now = bindparam("p_now", type_=UTCDateTime)
    candidates = (
        select(src.c.id, src.c.concurrency_key)
        .where(
            src.c.state == JobState.AVAILABLE.value,
            src.c.queue == bindparam("p_queue", type_=String),
            src.c.scheduled_at <= now,
        )
        .order_by(src.c.priority, src.c.scheduled_at, src.c.id)
        .limit(bindparam("p_limit", type_=Integer))
    )
    if by_worker:
        candidates = candidates.where(worker_filter(src.c.worker, dialect))
    if by_id:  # the ``p_ids`` parameter: one array on PostgreSQL
        if dialect == "postgresql":
            ids = src.c.id == func.any(bindparam("p_ids", type_=ARRAY(Uuid())))
        else:
            ids = src.c.id.in_(bindparam("p_ids", expanding=True))
        candidates = candidates.where(ids)
    if dialect == "postgresql":
        candidates = candidates.with_for_update(skip_locked=True)
    # Materialised, so PostgreSQL runs the locking subquery once: as a plain IN (subquery) it
    # may be re-run per outer row, and claim more than ``limit`` jobs.
    chosen = candidates.cte("candidates").prefix_with("MATERIALIZED", dialect="postgresql")
    # Keyless only among the first ``limit``: a keyed job there is not skipped over in favour
    # of keyless jobs behind it (one claim order for all jobs).
    chosen_ids = select(chosen.c.id)
    if keyless_only:
        chosen_ids = chosen_ids.where(chosen.c.concurrency_key.is_(None))
    stmt = update(job).where(job.c.id.in_(chosen_ids))
    if dialect != "postgresql":
        # PostgreSQL holds the candidates' row locks; repeating the state test there only
        # tempts the planner into scanning every available job instead of the primary key.
        stmt = stmt.where(job.c.state == JobState.AVAILABLE.value)
    stmt = stmt.values(
        state=JobState.EXECUTING.value,
        attempt=job.c.attempt + 1,
        attempted_at=now,
        lease_owner=bindparam("p_node", type_=String),
        lease_token=fresh_token_sql(dialect),
        lease_expires_at=bindparam("p_expires", type_=UTCDateTime),
        # A claim consumes the slot demand present now; demand arriving later re-arms it.
        demand_pending=False,
        control_pending=False,
        updated_at=now,
    ).returning(*job.c)
    if dialect == "postgresql":
        return _with_runs(tables, stmt)
    return stmt


def _with_runs(tables: Tables, claim: Any) -> Any:
    """One PostgreSQL statement that claims and opens the runs (a data-modifying CTE)."""
    run = tables.job_run
    now = bindparam("p_now", type_=UTCDateTime)
    claimed = claim.cte("claimed")
    queue_ms = cast(
        func.greatest(0, func.extract("epoch", now - claimed.c.scheduled_at) * 1000),
        BigInteger,
    )
    columns = [
        "job_id",
        "attempt",
        "queue",
        "worker",
        "node",
        "lease_token",
        "code_version",
        "queue_ms",
        "started_at",
    ]
    values = select(
        claimed.c.id,
        claimed.c.attempt,
        claimed.c.queue,
        claimed.c.worker,
        bindparam("p_node", type_=String),
        claimed.c.lease_token,
        bindparam("p_code_version", type_=String),
        queue_ms,
        now,
    )
    runs = insert(run).from_select(columns, values).cte("runs")
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


def restamp_run(db: Database, lease_token: uuid.UUID, code_version: str | None) -> None:
    """Record the code version an open run really starts under (a job claimed before an
    in-place upgrade that starts after it)."""
    run = db.tables.job_run
    with db.begin() as conn:
        conn.execute(
            update(run)
            .where(run.c.lease_token == lease_token, run.c.finished_at.is_(None))
            .values(code_version=code_version)
        )


def leases_held_by(job: Any, node: str, tokens: Sequence[uuid.UUID]) -> ColumnElement[bool]:
    """Jobs still executing under one of ``tokens``, leased to ``node``: the leases it holds."""
    return and_(
        job.c.state == state_literal(JobState.EXECUTING),
        job.c.lease_owner == node,
        job.c.lease_token.in_(list(tokens)),
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
                .where(leases_held_by(job, node, chunk))
                .values(lease_expires_at=now + lease, updated_at=now)
                .returning(job.c.lease_token)
            )
            held.update(r[0] for r in result)
    return held


def leases_still_held(db: Database, *, node: str, tokens: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of ``tokens`` this node still holds (no renewal: a read)."""
    if not tokens:
        return set()
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(select(job.c.lease_token).where(leases_held_by(job, node, tokens)))
        return {r[0] for r in rows}


def expire_leases(
    db: Database, *, node: str, tokens: Sequence[uuid.UUID], now: datetime
) -> None:
    """End these leases of this node now, so that any Lifeline rescues their jobs at once."""
    if not tokens:
        return
    job = db.tables.job
    with db.begin() as conn:
        conn.execute(
            update(job)
            .where(leases_held_by(job, node, tokens))
            .values(lease_expires_at=now, updated_at=now)
        )
