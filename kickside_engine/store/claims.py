"""Claiming due jobs under a lease, and starting their run history.

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

The statement itself is built in :mod:`~kickside_engine.store.claim_statement`; renewing and
ending leases is :mod:`~kickside_engine.store.leases` (re-exported here).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, insert, update

from kickside_engine.models import ClaimedJob, claimed_job
from kickside_engine.store.claim_statement import (
    claim_and_settle_statement,
    claim_statement,
    driver_statement,
    token_prefix,
)
from kickside_engine.store.database import Database
from kickside_engine.store.driver_json import use_fast_json
from kickside_engine.store.driver_rows import fetch_driver_rows
from kickside_engine.store.leases import (
    DEFAULT_LEASE,
    expire_leases,
    leases_held_by,
    leases_still_held,
    renew_leases,
)
from kickside_engine.store.rows import job_from_driver_row, job_from_row, sqlite_job_decoder
from kickside_engine.store.settle import UnnestSettle
from kickside_engine.store.sqlite_batches import open_runs
from kickside_engine.store.sqlite_driver import driver_statement as driver_statement_sqlite
from kickside_engine.store.sqlite_driver import fetch_rows, runs_on_sqlite3
from kickside_engine.store.types import as_utc

__all__ = [
    "DEFAULT_LEASE",
    "claim_jobs",
    "close_turn_connection",
    "expire_leases",
    "leases_held_by",
    "leases_still_held",
    "open_turn_connection",
    "renew_leases",
    "restamp_run",
    "start_runs",
]


def open_turn_connection(db: Database) -> Connection:
    """An autocommit PostgreSQL connection for a pool's turns (claims riding with settles).

    Its session never plans a sequential scan where an index can answer. psycopg prepares a
    statement from its fifth run, and PostgreSQL then keeps one generic plan, costed against the
    table sizes of that moment: a pool started on an empty run table kept a plan that settled
    each batch by reading every run, a cost that grew with the history (20 % of PostgreSQL's
    time per job over a 20,000-job drain) until an ANALYZE happened to replan it. Every turn
    statement looks rows up by key, so an index is always the right plan.

    It loads JSON with :func:`~kickside_engine.store.driver_json.load_json` (what
    ``json.loads`` gives, faster); the loader stays with the connection once it is back in
    the engine's pool, harmlessly. Its session's time zone is UTC, so that psycopg loads
    instants in :data:`datetime.UTC` itself, which the claimed rows keep as they are
    (in a server's named zone, even ``Etc/UTC``, each instant was converted again).
    """
    conn = db.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    try:
        conn.exec_driver_sql("SET enable_seqscan = off; SET TimeZone = 'UTC'")
        use_fast_json(conn.connection.driver_connection)
    except BaseException:
        conn.invalidate()
        conn.close()
        raise
    return conn


def close_turn_connection(conn: Connection) -> None:
    """Give a connection from :func:`open_turn_connection` back to the engine's pool with its
    session settings undone (or discard it, when that fails)."""
    try:
        conn.exec_driver_sql("RESET enable_seqscan; RESET TimeZone")
    except Exception:
        with contextlib.suppress(Exception):
            conn.invalidate()
    with contextlib.suppress(Exception):
        conn.close()


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
    (PostgreSQL, an :class:`~kickside_engine.store.settle.UnnestSettle`) settles a batch of
    finished attempts in the same statement: the supervisor's whole turn in one round trip and
    one commit, on an autocommit connection.
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
        "p_token_prefix": token_prefix(now, db.dialect),
    }
    by_worker = workers is not None
    if by_worker:
        params["p_workers"] = list(workers or ())
    if settle is not None:
        assert job_ids is None and db.is_postgresql
        stmt = claim_and_settle_statement(db.tables, keyless_only, by_worker, *settle.ctes(db))
        params.update(settle.params)
    else:
        by_id = job_ids is not None
        if by_id:
            params["p_ids"] = list(job_ids or ())
        stmt = claim_statement(db.tables, db.dialect, keyless_only, by_worker, by_id)
    if db.is_postgresql and job_ids is None:
        sql, constants = driver_statement(stmt, db.tables, db.engine.dialect)
        rows: Sequence[Any]
        if conn.connection.driver_connection.autocommit:  # type: ignore[union-attr]  # a turn
            rows = fetch_driver_rows(conn, sql, {**constants, **params})
        else:
            rows = conn.exec_driver_sql(sql, {**constants, **params}).fetchall()
        jobs = [job_from_driver_row(r) for r in rows]
    elif job_ids is None and runs_on_sqlite3(conn):
        decode = sqlite_job_decoder(db.tables, conn.dialect)
        instants: dict[Any, Any] = {}  # the claimed rows share their instants
        rows = fetch_rows(conn, driver_statement_sqlite(stmt, conn.dialect), params)
        jobs = [decode(r, instants) for r in rows]
    else:
        jobs = [job_from_row(r) for r in conn.execute(stmt, params)]
    if not jobs:
        return []
    claimed = [
        claimed_job(j, node, j.lease_token, expires)  # type: ignore[arg-type]
        for j in jobs
    ]
    # The id as its integer: comparing UUID objects runs Python code for every comparison.
    claimed.sort(key=lambda c: (c.job.priority, c.job.scheduled_at, c.job.id.int))
    if db.dialect != "postgresql":
        start_runs(db, conn, claimed, now=now, code_version=code_version)
    return claimed


def start_runs(
    db: Database,
    conn: Connection,
    claimed: Sequence[ClaimedJob],
    *,
    now: datetime,
    code_version: str | None,
) -> None:
    """Open one run-history row per claimed job (claimed in ``conn``'s transaction)."""
    if runs_on_sqlite3(conn):  # one statement for the batch: see store.sqlite_batches
        for node in dict.fromkeys(c.node for c in claimed):  # one, from a claim
            ids = [c.job.id for c in claimed if c.node == node]
            open_runs(
                conn,
                db.tables.job,
                db.tables.job_run,
                ids,
                node=node,
                code_version=code_version,
                now=now,
            )
        return
    rows = [
        {
            "job_id": c.job.id,
            "attempt": c.job.attempt,
            "queue": c.job.queue,
            "worker": c.job.worker,
            "node": c.node,
            "lease_token": c.lease_token,
            "code_version": code_version,
            "queue_ms": queue_ms(now, c.job.scheduled_at),
            "started_at": now,
        }
        for c in claimed
    ]
    conn.execute(insert(db.tables.job_run), rows)


def queue_ms(started_at: datetime, scheduled_at: datetime) -> int:
    """A run's milliseconds in the queue, rounded half up as the claim statements round them
    (PostgreSQL's cast to ``bigint``, SQLite's ``round``), and never below zero."""
    microseconds = (started_at - scheduled_at) // _MICROSECOND
    return max(0, (microseconds + 500) // 1000)


_MICROSECOND = timedelta(microseconds=1)


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
