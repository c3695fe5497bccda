"""Queries of executing jobs read them through an index, also under a generic plan.

psycopg prepares a statement on the server from its fifth run on a connection, and PostgreSQL
may then plan it once for any parameter values: with the state a parameter, the planner can
neither use the partial lease index (``state = 'executing'``) nor tell that executing jobs are
few, and reads the whole table. The engine writes the state into the SQL as a literal instead.

Each query is captured as the engine runs it, then explained: on PostgreSQL as a prepared
statement under ``plan_cache_mode = force_generic_plan``; on SQLite as bound (SQLite plans
with the bound values, so there this only guards the plan).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import sql

from kickside_engine import Database, JobBuilder, JobState, enqueue_many
from kickside_engine.clock import utcnow
from kickside_engine.control import JobFilter, list_jobs
from kickside_engine.control.consistency import find_inconsistencies
from kickside_engine.control.health import doctor
from kickside_engine.control.metrics import overview
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.plugins.lifeline import rescue_expired
from kickside_engine.runtime.supervision import LeaseKeeper
from kickside_engine.store import claims
from kickside_engine.store.claims import (
    claim_jobs,
    close_turn_connection,
    open_turn_connection,
)
from kickside_engine.store.leases import renew_leases
from kickside_engine.store.settle import unnest_settle
from kickside_engine.store.tables import state_literal

from ..conftest import PG_URL

LEASE_INDEX = "ix_kickside_job_lease"
#: The full index that leads with the state: given the state as a literal, it too reads only
#: the executing jobs (the planner takes it where no lease column narrows the search).
FETCH_INDEX = "ix_kickside_job_fetch"
NODE = "node-a"
JOBS = 20_000
EXECUTING = 20
EXPIRED = 5
#: How a plan reads kickside_job: the whole table, or through which of its indexes.
JOB_ACCESS = re.compile(r"\b(?:Seq Scan on|SCAN) kickside_job\b|\bix_kickside_job_(?!run_)\w+")

Captured = list[tuple[str, Any]]


def _seed(db: Database, now: datetime) -> list[uuid.UUID]:
    """Many jobs, few of them executing; returns the executing jobs' lease tokens."""
    job = db.tables.job
    # One insert: every row names the same columns.
    lease = ("lease_owner", "lease_token", "lease_expires_at", "attempted_at")
    common: dict[str, Any] = {"worker": "w", "args": {}, "meta": {}, "tags": [], "errors": []}
    common |= dict.fromkeys(("completed_at", "finalized_at", *lease))
    rows: list[dict[str, Any]] = []
    tokens: list[uuid.UUID] = []
    for i in range(JOBS):
        at = now - timedelta(seconds=JOBS - i)
        row = {"id": uuid.uuid4(), "inserted_at": at, "scheduled_at": at, "updated_at": at}
        if i < JOBS * 4 // 5:
            row.update(state=JobState.COMPLETED.value, attempt=1, completed_at=at, finalized_at=at)
        elif i < JOBS - EXECUTING:
            row.update(state=JobState.AVAILABLE.value, attempt=0)
        else:
            token = uuid.uuid4()
            tokens.append(token)
            expires = now + timedelta(minutes=-1 if len(tokens) <= EXPIRED else 5)
            row.update(
                state=JobState.EXECUTING.value,
                attempt=1,
                attempted_at=at,
                lease_owner=NODE,
                lease_token=token,
                lease_expires_at=expires,
            )
        rows.append(common | row)
    with db.begin() as conn:
        conn.execute(sa.insert(job), rows)
        if db.is_postgresql:
            conn.execute(sa.text(f"ANALYZE {job.fullname}"))
    return tokens


@contextmanager
def _capture(db: Database) -> Iterator[Captured]:
    """Every statement the engine sends, with its parameters."""
    captured: Captured = []

    def record(_c: Any, _cur: Any, statement: str, params: Any, _ctx: Any, _many: bool) -> None:
        captured.append((statement, params))

    sa.event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield captured
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", record)


@contextmanager
def _capture_turn(monkeypatch: pytest.MonkeyPatch) -> Iterator[Captured]:
    """Every claim a turn connection sends straight to its driver cursor (the engine's
    execution events do not see those), with its parameters."""
    captured: Captured = []
    fetch = claims.fetch_driver_rows

    def record(conn: Any, sql: str, params: Any) -> list[Any]:
        captured.append((sql, params))
        return fetch(conn, sql, params)

    monkeypatch.setattr(claims, "fetch_driver_rows", record)
    try:
        yield captured
    finally:
        monkeypatch.setattr(claims, "fetch_driver_rows", fetch)


def _keeper(db: Database) -> LeaseKeeper:
    return LeaseKeeper(db, NODE, timedelta(minutes=5))


def _check_leases(db: Database, now: datetime, tokens: list[uuid.UUID]) -> None:
    keeper = _keeper(db)
    for token in tokens:
        keeper.track(token, 0.0)
    keeper.check_soon()
    keeper.maintain(0.0)


Run = Callable[[Database, datetime, list[uuid.UUID]], object]


class Query(NamedTuple):
    """How the engine runs a query of executing jobs, and text only its statement contains."""

    run: Run
    markers: tuple[str, ...]
    #: The indexes its plan may read kickside_job through.
    indexes: tuple[str, ...] = (LEASE_INDEX, FETCH_INDEX)


QUERIES: dict[str, Query] = {
    "overview: expired leases": Query(
        lambda db, now, tokens: overview(db, now),
        ("count(*)", "kickside_job.lease_expires_at <"),
        (LEASE_INDEX,),
    ),
    "doctor: expired leases": Query(
        lambda db, now, tokens: doctor(db, now),
        ("count(*)", "kickside_job.lease_expires_at <"),
        (LEASE_INDEX,),
    ),
    "doctor: stuck jobs": Query(
        lambda db, now, tokens: doctor(db, now), ("kickside_job.max_execution_ms IS NOT NULL",)
    ),
    "leases view": Query(
        lambda db, now, tokens: list_jobs(db, JobFilter(states=(JobState.EXECUTING,)), limit=200),
        ("kickside_job.inserted_at DESC",),
    ),
    "consistency: executing without lease": Query(
        lambda db, now, tokens: find_inconsistencies(db), ("kickside_job.lease_owner IS NULL",)
    ),
    "consistency: executing without open run": Query(
        lambda db, now, tokens: find_inconsistencies(db), ("kickside_job_run.job_id = ",)
    ),
    "lease check": Query(_check_leases, ("SELECT", "lease_token IN")),
    "lease renewal": Query(
        lambda db, now, tokens: renew_leases(db, node=NODE, tokens=tokens, now=now),
        ("UPDATE", "RETURNING"),
    ),
    "lease expiry": Query(
        lambda db, now, tokens: _keeper(db).expire_now(tokens), ("UPDATE", "lease_expires_at=")
    ),
    # Last: the rescue moves the expired jobs.
    "lifeline rescue": Query(
        lambda db, now, tokens: rescue_expired(db, now),
        ("ORDER BY", "kickside_job.lease_expires_at, "),
        (LEASE_INDEX,),
    ),
}


def _postgresql_plan(
    statement: str,
    params: dict[str, Any],
    conn: psycopg.Connection[Any] | None = None,
    mode: str = "force_generic_plan",
) -> str:
    """The generic plan of ``statement`` (psycopg's ``%(name)s`` style), prepared on the server
    (in the session of ``conn``, an autocommit connection, when given); with ``mode``
    ``force_custom_plan``, the plan made for ``params`` (a prepared statement's first runs)."""
    if conn is None:
        url = sa.make_url(PG_URL).set(drivername="postgresql")
        with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as own:
            return _postgresql_plan(statement, params, own, mode)
    names: list[str] = []

    def number(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return "%"
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    numbered = re.sub(r"%\((\w+)\)s|%%", number, statement)
    conn.execute(sql.SQL("SET plan_cache_mode = {}").format(sql.Identifier(mode)))
    conn.execute(sql.SQL("PREPARE q AS {}").format(sql.SQL(numbered)))
    try:
        arguments = sql.SQL(", ").join(sql.Literal(params[n]) for n in names)
        rows = conn.execute(sql.SQL("EXPLAIN EXECUTE q ({})").format(arguments))
        return "\n".join(str(r[0]) for r in rows)
    finally:
        conn.execute("DEALLOCATE q")
        conn.execute("RESET plan_cache_mode")


def _sqlite_plan(db: Database, statement: str, params: Any) -> str:
    with db.engine.connect() as conn:
        rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
        return "\n".join(str(r[-1]) for r in rows)


def test_queries_of_executing_jobs_read_them_through_an_index(db: Database) -> None:
    now = utcnow()
    tokens = _seed(db, now)
    wrong: dict[str, str] = {}
    for name, query in QUERIES.items():
        with _capture(db) as captured:
            query.run(db, now, tokens)
        statements = [(s, p) for s, p in captured if all(m in s for m in query.markers)]
        assert statements, f"{name}: no statement contains {query.markers}"
        for statement, params in statements:
            if db.is_postgresql:
                plan = _postgresql_plan(statement, params)
            else:
                plan = _sqlite_plan(db, statement, params)
            access = set(JOB_ACCESS.findall(plan))
            if not access or not access <= set(query.indexes):
                wrong[name] = plan
    assert not wrong, "\n\n".join(f"{name}:\n{plan}" for name, plan in wrong.items())


def test_only_a_job_state_becomes_a_literal() -> None:
    assert str(state_literal(JobState.EXECUTING)) == "'executing'"
    with pytest.raises(ValueError, match="unknown job state"):
        state_literal("executing' OR '1' = '1")


def test_a_pool_turn_reads_through_indexes_when_its_plan_was_made_on_empty_tables(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn statement (claim + settle of the last batch) on the pool's turn connection.

    Planned generically while the run table holds a handful of rows (a pool just started on a
    fresh database), the settle used to read every run to find the batch's: a plan PostgreSQL
    keeps for the connection's life while the history grows.
    """
    if not db.is_postgresql:
        pytest.skip("turn connections and generic plans are PostgreSQL's")
    enqueue_many(db, [JobBuilder("noop", {"i": i}) for i in range(40)])
    with db.engine.connect() as conn:
        server_zone = conn.exec_driver_sql("SHOW TimeZone").scalar()
    turn = open_turn_connection(db)
    try:
        now = utcnow()
        claimed = claim_jobs(db, turn, queue="default", node=NODE, limit=10, now=now)
        # Instants load in UTC itself on a turn (none converted again), and claims keep them.
        assert turn.exec_driver_sql("SHOW TimeZone").scalar() == "UTC"
        assert all(c.job.attempted_at.tzinfo is UTC for c in claimed)  # type: ignore[union-attr]
        done = ExecutionResult(ResultKind.DONE, utcnow(), 1)
        inline = unnest_settle(db, [settlement_for(c, done) for c in claimed])
        assert inline is not None
        with _capture_turn(monkeypatch) as captured:
            claim_jobs(db, turn, queue="default", node=NODE, limit=10, now=now, settle=inline)
        ((statement, params),) = captured
        plan = _postgresql_plan(statement, params, turn.connection.driver_connection)
    finally:
        close_turn_connection(turn)
    assert "kickside_job_run" in plan and "Update on kickside_job_run" in plan
    assert "Seq Scan" not in plan, plan
    with db.engine.connect() as conn:  # the settings do not leak into the engine's pool
        assert conn.exec_driver_sql("SHOW enable_seqscan").scalar() == "on"
        assert conn.exec_driver_sql("SHOW TimeZone").scalar() == server_zone


def test_a_turn_joins_its_settle_batch_once_not_once_per_job(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The settle riding a claim joins the batch document to the jobs and runs it settles.

    With the fences (the job still executing, the run still open) as plain filters, the
    planner took them for the few rows such filters usually keep, chose a nested loop and
    read the whole document once per job: 40,000 comparisons for a 200-job turn, two thirds
    of the statement's time. That was the plan of a prepared statement's first runs (made
    for their values), and of every run while the planner kept finding it cheaper.
    """
    if not db.is_postgresql:
        pytest.skip("the settle that rides a claim is PostgreSQL's")
    batch = 200
    enqueue_many(db, [JobBuilder("noop", {"i": i}) for i in range(batch * 8)])
    turn = open_turn_connection(db)
    try:
        done = ExecutionResult(ResultKind.DONE, utcnow(), 1)
        claimed = claim_jobs(db, turn, queue="default", node=NODE, limit=batch, now=utcnow())
        for _ in range(5):  # a history of settled runs, as a running pool has
            inline = unnest_settle(db, [settlement_for(c, done) for c in claimed])
            claimed = claim_jobs(
                db, turn, queue="default", node=NODE, limit=batch, now=utcnow(), settle=inline
            )
        inline = unnest_settle(db, [settlement_for(c, done) for c in claimed])
        assert inline is not None
        with _capture_turn(monkeypatch) as captured:
            claim_jobs(
                db, turn, queue="default", node=NODE, limit=batch, now=utcnow(), settle=inline
            )
        ((statement, params),) = captured
        driver = turn.connection.driver_connection
        # As a pool just started sees the tables (statistics not gathered yet), then analysed.
        plans = [_postgresql_plan(statement, params, driver, mode) for mode in _PLAN_MODES]
        turn.exec_driver_sql(f"ANALYZE {db.tables.job.fullname}, {db.tables.job_run.fullname}")
        plans += [_postgresql_plan(statement, params, driver, mode) for mode in _PLAN_MODES]
    finally:
        close_turn_connection(turn)
    for plan in plans:
        assert "jsonb_to_recordset" in plan
        assert not _batch_joined_per_row(plan), plan


_PLAN_MODES = ("force_custom_plan", "force_generic_plan")
_BATCH_COLUMN = re.compile(r"\bv(?:_\d+)?\.(?:_id|_token)\b")


def _batch_joined_per_row(plan: str) -> bool:
    """Whether a nested loop matches the batch document's rows by a join filter: each row
    of its outer side then reads the whole document (an index lookup, ``Index Cond``, or a
    hash join's ``Join Filter`` after its ``Hash Cond``, do not)."""
    node = ""
    for line in plan.splitlines():
        text = line.strip()
        if text.startswith("->") or not line.startswith(" "):
            node = text
        elif (
            text.startswith("Join Filter:") and "Nested Loop" in node and _BATCH_COLUMN.search(text)
        ):
            return True
    return False
