"""A claimed job is the job as stored, field for field, however the claim read its row.

The claim reads the driver's rows directly (psycopg's, sqlite3's: no SQLAlchemy result
processing) and builds each job positionally; a column out of place or a value left
unconverted shows here.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import select

from kickside_engine import (
    Database,
    JobBuilder,
    JobKind,
    JobState,
    claim,
    enqueue,
    enqueue_many,
    get_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.models import Job
from kickside_engine.plugins.stager import stage
from kickside_engine.store.claims import claim_jobs, close_turn_connection, open_turn_connection
from kickside_engine.store.driver_json import load_json
from kickside_engine.store.driver_rows import fetch_driver_rows
from kickside_engine.store.rows import job_from_driver_row
from kickside_engine.store.settle import settle_batch
from kickside_engine.store.tables import TABLES


def test_job_fields_follow_the_table_columns() -> None:
    assert tuple(TABLES.job.columns.keys()) == tuple(Job.__dataclass_fields__)


def test_a_claimed_job_equals_the_stored_job_in_every_field(db: Database) -> None:
    builder = (
        JobBuilder("echo", {"text": "ünïcødé", "n": [1, 2.5, None]})
        .queue("rows")
        .priority(3)
        .max_attempts(4)
        .tags(["a", "b"])
        .meta({"origin": "test"})
    )
    inserted = enqueue(db, builder)
    (first,) = claim(db, queue="rows", node="n1")
    failed = ExecutionResult(ResultKind.ERROR, utcnow(), 5, error="RuntimeError: boom")
    with db.begin() as conn:  # a failed attempt leaves an error entry and a retry time
        settle_batch(db, conn, [settlement_for(first, failed)])
    later = utcnow() + timedelta(days=2)  # past the default backoff of a first failure
    assert stage(db, later) == 1
    (second,) = claim(db, queue="rows", node="n2", now=later, code_version="v2")
    stored = get_job(db, inserted.id)
    assert stored is not None and stored.state is JobState.EXECUTING
    assert second.job == stored
    job = second.job
    assert job.kind is JobKind.ONESHOT and job.state is JobState.EXECUTING
    assert job.attempt == 2 and job.lease_owner == "n2" and second.lease_token == job.lease_token
    assert [e.attempt for e in job.errors] == [1] and "boom" in job.errors[0].error
    instants = [job.inserted_at, job.scheduled_at, job.attempted_at, job.lease_expires_at]
    assert all(t is not None and t.tzinfo is UTC for t in instants)


def test_a_driver_row_converts_every_coded_field() -> None:
    now = utcnow()
    values = [None] * len(Job.__dataclass_fields__)
    names = list(Job.__dataclass_fields__)
    values[names.index("kind")] = "slot"
    values[names.index("state")] = "parked"
    values[names.index("errors")] = [{"attempt": 2, "at": now.isoformat(), "error": "x"}]
    values[names.index("updated_at")] = now.astimezone(UTC).astimezone()  # another zone
    job = job_from_driver_row(values)
    assert job.kind is JobKind.SLOT and job.state is JobState.PARKED
    assert job.errors[0].attempt == 2 and job.errors[0].at == now
    assert job.updated_at == now and job.updated_at.tzinfo is UTC


def test_the_turn_connection_loads_json_as_json_loads_does() -> None:
    documents = [
        b"{}",
        b"[]",
        b'{"text": "\xc3\xbcn\xc3\xafc\xc3\xb8d\xc3\xa9", "n": [1, 2.5, null, true]}',
        b'[{"a": {}}, [], "\\u00e9", 1e400]',
        b'"just text"',
        b"null",
        b" {} ",
    ]
    for document in documents:
        assert load_json(document) == json.loads(document)
    assert load_json('{"a": [1]}') == {"a": [1]} and load_json("[]") == []  # text too
    first, second = load_json(b"{}"), load_json(b"{}")
    first["changed"] = True
    assert second == {}  # each empty document is an object of its own
    with pytest.raises(json.JSONDecodeError):
        load_json(b"{not json")


def test_a_turn_claims_args_meta_and_tags_as_stored(db: Database) -> None:
    """The pool's PostgreSQL turns read JSON through their own loader: values come back as the
    application gave them, and each job's empty values are its own objects."""
    if not db.is_postgresql:
        pytest.skip("turn connections are PostgreSQL's (SQLite turns use the engine's own)")
    args = {"text": "ünïcødé", "nested": {"list": [1, 2.5, None, True], "empty": {}}}
    enqueue_many(
        db,
        [
            JobBuilder("echo", args).queue("turn").tags(["a", "b"]).meta({"origin": "t"}),
            JobBuilder("echo", {}).queue("turn"),
            JobBuilder("echo", {}).queue("turn"),
        ],
    )
    conn = open_turn_connection(db)
    try:
        claimed = claim_jobs(db, conn, queue="turn", node="n1", limit=10, now=utcnow())
    finally:
        close_turn_connection(conn)
    full, *plain = sorted(claimed, key=lambda c: c.job.args != args)
    assert full.job.args == args and full.job.tags == ["a", "b"]
    assert full.job.meta == {"origin": "t"}
    assert [(c.job.args, c.job.meta, c.job.tags, c.job.errors) for c in plain] == [
        ({}, {}, [], [])
    ] * 2
    plain[0].job.args["mine"] = 1
    assert plain[1].job.args == {}


def test_a_turn_statement_fails_with_sqlalchemys_errors(db: Database) -> None:
    """Turn claims go to the driver's cursor; its errors still arrive as the engine's
    connection raises them (the pool's outage handling and error translation rely on it)."""
    if not db.is_postgresql:
        pytest.skip("turn connections are PostgreSQL's")
    conn = open_turn_connection(db)
    try:
        with pytest.raises(sa_exc.ProgrammingError) as failed:
            fetch_driver_rows(conn, "SELECT * FROM no_such_table WHERE x = %(x)s", {"x": 1})
        assert "no_such_table" in str(failed.value.orig)
        assert fetch_driver_rows(conn, "SELECT %(x)s::int", {"x": 7}) == [(7,)]  # still usable
    finally:
        close_turn_connection(conn)


def test_lease_tokens_are_unique_uuid7s_ordered_by_claim_time(db: Database) -> None:
    """Each claim hands out fencing tokens that are UUIDv7s of its own time: unique, with
    random bits, and later claims' tokens sort after earlier ones', so the run table's token
    index grows at its end (random tokens spread each claim over the whole index)."""
    enqueue_many(db, [JobBuilder("noop") for _ in range(400)])
    start = utcnow()
    first = claim(db, queue="default", node="n1", limit=200, now=start)
    second = claim(db, queue="default", node="n1", limit=200, now=start + timedelta(seconds=2))
    tokens = [c.lease_token for c in first + second]
    assert len(set(tokens)) == 400
    for token in tokens:
        assert token is not None and token.version == 7 and token.variant == uuid.RFC_4122
    assert max(t.int for t in tokens[:200]) < min(t.int for t in tokens[200:])  # type: ignore[union-attr]
    start_ms = (start - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    assert {t.int >> 80 for t in tokens[:200]} == {start_ms}  # type: ignore[union-attr]
    assert len({t.int & ((1 << 62) - 1) for t in tokens}) == 400  # type: ignore[union-attr]
    with db.read() as conn:
        stored = {row[0] for row in conn.execute(select(db.tables.job_run.c.lease_token))}
    assert stored == set(tokens)  # the run rows carry the same tokens
