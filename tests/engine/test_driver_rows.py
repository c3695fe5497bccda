"""The pool's hot statements run on the driver (sqlite3, psycopg) without SQLAlchemy's per-row
work; what they store and what they read back must be exactly what the ``Connection`` path
stores and reads.

- A claim returns each job as a later read gives it (``test_claim_rows.py``), whatever the
  number of worker names it filters by (one parameter: a JSON array on SQLite).
- A batch settle (the pool's turn) stores the job and run rows that a settle through
  SQLAlchemy stores for the same outcome.
- On SQLite, every converter equals the column type's own processor, value by value.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, claim, enqueue_fanout
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.store import settle as settle_module
from kickside_engine.store.claim_statement import claim_statement, token_prefix
from kickside_engine.store.claims import start_runs
from kickside_engine.store.settle import settle, settle_batch
from kickside_engine.store.sqlite_batches import _job_update_sql, _run_update_sql
from kickside_engine.store.sqlite_driver import (
    bind_converter,
    driver_statement,
    result_converter,
)
from kickside_engine.store.tables import build_tables

NOW = datetime(2026, 12, 3, 11, 0, 0, 250000, tzinfo=UTC)


def _rich(i: int) -> JobBuilder:
    return (
        JobBuilder("echo", {"i": i, "text": "ünïcødé \t ' \" ✓", "nested": [None, 1.5, {}]})
        .queue("rows")
        .priority(i % 3)
        .max_attempts(5)
        .tags(["x", f"t{i}"])
        .meta({"origin": "tab\there", "n": i})
    )


def test_a_claim_filters_by_worker_names_whatever_their_number(db: Database) -> None:
    names = [f"w{i}" for i in range(40)]
    for name in names:
        JobBuilder(name, {}).queue("many").insert(db, now=NOW)
    JobBuilder("other", {}).queue("many").insert(db, now=NOW)
    got = claim(db, queue="many", node="n", limit=100, now=NOW, workers=names[::2])
    assert sorted(c.job.worker for c in got) == sorted(names[::2])
    assert claim(db, queue="many", node="n", limit=100, now=NOW, workers=[]) == []


def _rows(db: Database, table: sa.Table, column: Any, values: list[Any]) -> list[dict[str, Any]]:
    with db.read() as conn:
        rows = conn.execute(
            sa.select(sa.text("*")).select_from(table).where(column.in_(values))
        ).all()
    return [dict(r._mapping) for r in rows]


@pytest.mark.parametrize(
    "result",
    [
        ExecutionResult(ResultKind.DONE, NOW, 12, result={"ok": True, "text": "é"}),
        ExecutionResult(ResultKind.ERROR, NOW, 7, error="failed: é"),
        ExecutionResult(ResultKind.DISCARD, NOW, 3, error="given up"),
    ],
    ids=["done", "retry", "discard"],
)
@pytest.mark.parametrize("update_from", [True, False], ids=["one-statement", "per-row"])
def test_a_batch_settle_stores_what_a_settle_through_sqlalchemy_stores(
    db: Database, result: ExecutionResult, update_from: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``per-row``: SQLite libraries older than 3.33 have no ``UPDATE ... FROM``."""
    if not update_from:
        monkeypatch.setattr(settle_module, "updates_from_supported", lambda _conn: False)
    for i in range(2):
        _rich(i).priority(0).insert(db, now=NOW)
    batch_one, plain_one = claim(db, queue="rows", node="n1", limit=2, now=NOW)
    by_batch = settlement_for(batch_one, result)
    # The same values (a retry's time has jitter), for the other job and its lease.
    plain = replace(by_batch, job_id=plain_one.job.id, lease_token=plain_one.lease_token)
    with db.begin() as conn:
        settle_batch(db, conn, [by_batch])
    with db.begin() as conn:
        assert settle(db, conn, [plain]) == {plain_one.job.id}
    jobs = _rows(db, db.tables.job, db.tables.job.c.id, [batch_one.job.id, plain_one.job.id])
    runs = _rows(
        db,
        db.tables.job_run,
        db.tables.job_run.c.job_id,
        [batch_one.job.id, plain_one.job.id],
    )
    assert len(jobs) == len(runs) == 2
    for rows, private in ((jobs, ("id", "args", "tags", "meta")), (runs, ("id", "job_id"))):
        for row in rows:
            for key in (*private, "lease_token"):
                row.pop(key, None)
        assert rows[0] == rows[1]


# SQLite's converters against the types' own processors ------------------------------------

_INSTANTS = [
    NOW,
    NOW.replace(microsecond=0),
    datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
]
_DOCUMENTS: list[Any] = [{}, [], {"a": [1, None, "ü"]}, ["x"], "text", 0, 1.5, True]
_SAMPLES: dict[type, list[Any]] = {
    sa.Uuid: [uuid.uuid4(), uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)],
    sa.JSON: _DOCUMENTS,
}


def _samples(type_: Any) -> list[Any]:
    if type_.__class__.__name__ == "UTCDateTime":
        return _INSTANTS
    for kind, values in _SAMPLES.items():
        if isinstance(type_, kind):
            return values
    if isinstance(type_, sa.Boolean):
        return [True, False]
    if isinstance(type_, sa.Integer):
        return [0, 7, 2**40]
    return ["", "plain", "ünïcødé"]


def _columns() -> list[sa.Column[Any]]:
    tables = build_tables(None)
    return [*tables.job.columns, *tables.job_run.columns]


@pytest.mark.parametrize("column", _columns(), ids=lambda c: f"{c.table.name}.{c.name}")
def test_sqlite_converters_equal_the_types_processors(column: sa.Column[Any]) -> None:
    dialect = sa.create_engine("sqlite://").dialect
    impl = column.type.dialect_impl(dialect)
    bind = impl.bind_processor(dialect)
    result = impl.result_processor(dialect, None)
    fast_bind = bind_converter(column.type, dialect)
    fast_result = result_converter(column.type, dialect)
    for value in _samples(column.type):
        stored = bind(value) if bind is not None else value
        fast_stored = fast_bind(value) if fast_bind is not None else value
        assert fast_stored == stored and type(fast_stored) is type(stored), value
        read = result(stored) if result is not None else stored
        fast_read = fast_result(stored) if fast_result is not None else stored
        assert fast_read == read and type(fast_read) is type(read), value


def test_a_batch_of_runs_the_database_refuses_raises_sqlalchemys_error_and_writes_nothing(
    db: Database,
) -> None:
    JobBuilder("noop", {}).insert(db, now=NOW)
    JobBuilder("noop", {}).insert(db, now=NOW)
    first, second = claim(db, queue="default", node="n1", limit=2, now=NOW)
    run = db.tables.job_run
    with db.begin() as conn:  # the first job's run is gone: opening it again is allowed
        conn.execute(sa.delete(run).where(run.c.lease_token == first.lease_token))
    with pytest.raises(sa.exc.IntegrityError), db.begin() as conn:
        # The second job's run is open already: its lease token is taken.
        start_runs(db, conn, [first, second], now=NOW, code_version=None)
    with db.read() as conn:
        tokens = conn.execute(sa.select(run.c.lease_token)).scalars().all()
    assert tokens == [second.lease_token]  # the refused batch left nothing


@pytest.mark.parametrize("by_worker", [False, True], ids=["any-worker", "by-worker"])
def test_a_sqlite_claim_updates_its_jobs_by_primary_key_not_the_backlog(
    db: Database, by_worker: bool
) -> None:
    """The claim's update finds the chosen jobs by id: a test of their state beside it once
    led SQLite to read every available job through the state index at every claim."""
    if not db.is_sqlite:
        pytest.skip("PostgreSQL's claim plans are checked in test_generic_plans.py")
    enqueue_fanout(db, JobBuilder("noop"), [{} for _ in range(500)])  # never analysed
    stmt = claim_statement(db.tables, "sqlite", True, by_worker, False)
    ds = driver_statement(stmt, db.engine.dialect)
    params = ds.params(
        {
            "p_queue": "default",
            "p_now": NOW,
            "p_limit": 10,
            "p_node": "n",
            "p_expires": NOW,
            "p_code_version": None,
            "p_token_prefix": token_prefix(NOW, "sqlite"),
            **({"p_workers": ["noop"]} if by_worker else {}),
        }
    )
    with db.read() as conn:
        driver: Any = conn.connection.driver_connection
        plan = [row[3] for row in driver.execute("EXPLAIN QUERY PLAN " + ds.sql, params)]
    target = plan[0]  # the update's own search comes first, its subqueries after
    assert "sqlite_autoindex_kickside_job_1 (id=?)" in target, plan
    assert any("ix_kickside_job_fetch (state=? AND queue=?)" in line for line in plan), plan


def test_a_claims_runs_carry_its_jobs_node_code_version_start_and_queue_time(
    db: Database,
) -> None:
    """The run rows a claim opens (on SQLite read from the claimed job rows in one
    statement; on PostgreSQL in the claim's own): each job's id, attempt, queue, worker and
    lease token, the claiming node and code version, the claim's time as the start and the
    milliseconds since the job was due."""
    due = NOW.replace(microsecond=250_000)
    for n in range(3):
        JobBuilder("noop", {}).queue("mail.eu-west/1").insert(db, now=due + timedelta(seconds=n))
    at = due + timedelta(seconds=2, milliseconds=500)
    claimed = claim(db, queue="mail.eu-west/1", node="n ' 2", limit=3, now=at, code_version="v'1")
    assert len(claimed) == 3
    run = db.tables.job_run
    with db.read() as conn:
        rows = {r["job_id"]: r for r in conn.execute(sa.select(run)).mappings()}
    assert sorted(rows) == sorted(c.job.id for c in claimed)
    for c in claimed:
        r = rows[c.job.id]
        assert r["attempt"] == c.job.attempt == 1
        assert (r["queue"], r["worker"], r["node"]) == ("mail.eu-west/1", "noop", "n ' 2")
        assert r["lease_token"] == c.lease_token
        assert r["code_version"] == "v'1" and r["started_at"] == at
        assert r["finished_at"] is None and r["outcome"] is None
    assert [rows[c.job.id]["queue_ms"] for c in claimed] == [2500, 1500, 500]


@pytest.mark.parametrize("analysed", [False, True], ids=["fresh", "analysed"])
def test_sqlites_batch_settle_reads_its_batch_once(db: Database, analysed: bool) -> None:
    """The batch is the outer loop, each job found by id and each run by its lease token:
    with the state index first, SQLite read the whole batch once per executing job."""
    if not db.is_sqlite:
        pytest.skip("PostgreSQL's batch settle plans are checked in test_generic_plans.py")
    enqueue_fanout(db, JobBuilder("noop"), [{} for _ in range(300)])
    claim(db, queue="default", node="n", limit=300, now=NOW)  # 300 executing jobs
    if analysed:
        with db.begin() as conn:
            conn.exec_driver_sql("ANALYZE")
    statements = {
        "job": _job_update_sql(db.tables.job, ("state", "updated_at")),
        "run": _run_update_sql(db.tables.job_run),
    }
    with db.read() as conn:
        driver: Any = conn.connection.driver_connection
        for name, sql in statements.items():
            plan = [row[3] for row in driver.execute("EXPLAIN QUERY PLAN " + sql, {"rows": "[]"})]
            assert plan[0].startswith("SCAN json_each"), (name, plan)
            assert "USING INDEX" in plan[1] and "=?)" in plan[1], (name, plan)
