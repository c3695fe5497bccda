"""Reads by id take any number of ids, and a statement the driver refuses is not an outage."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    Database,
    JobBuilder,
    JobState,
    enqueue_many,
    get_job_statuses,
)

#: More ids than either driver takes as bound parameters (psycopg 65,535, SQLite 32,766).
MANY = 100_000


@pytest.fixture
def statements(db: Database) -> Iterator[list[tuple[str, Any]]]:
    """The statements (and their parameters) sent to the database while the test runs."""
    seen: list[tuple[str, Any]] = []

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, *args: Any) -> None:
        seen.append((statement, parameters))

    sa.event.listen(db.engine, "before_cursor_execute", before)
    yield seen
    sa.event.remove(db.engine, "before_cursor_execute", before)


def test_get_job_statuses_takes_100000_ids_in_one_query_with_one_parameter(
    db: Database, statements: list[tuple[str, Any]]
) -> None:
    inserted = enqueue_many(db, [JobBuilder("ok", {"n": n}) for n in range(5)])
    wanted = [uuid.uuid4() for _ in range(MANY)] + [job.id for job in inserted]
    statements.clear()
    statuses = get_job_statuses(db, wanted)
    assert statuses == {job.id: JobState.AVAILABLE for job in inserted}
    selects = [(s, p) for s, p in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 1
    ((_, parameters),) = selects
    assert len(parameters) == 1  # the whole set as one value, whatever its size


def test_a_statement_the_driver_refuses_is_a_failure_not_database_unavailable(
    db: Database,
) -> None:
    # Both are OperationalErrors on a healthy connection, not an outage, which callers and
    # scripts (exit 5) would retry forever. On PostgreSQL one bind parameter per id, which
    # psycopg refuses to send (a client error without SQLSTATE); SQLite reports a missing
    # table that way (its limit on variables differs from build to build).
    job = db.tables.job
    refused: sa.Executable = (
        sa.select(job.c.id).where(job.c.id.in_([uuid.uuid4() for _ in range(MANY)]))
        if db.is_postgresql
        else sa.text("SELECT * FROM no_such_table")
    )
    with pytest.raises(sa.exc.OperationalError), db.read() as conn:
        conn.execute(refused)  # not DatabaseUnavailableError
    with db.read() as conn:  # the connection was fine all along
        assert conn.execute(sa.select(sa.func.count()).select_from(job)).scalar_one() == 0
