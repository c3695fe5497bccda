"""A single enqueue stores its row exactly as a transaction's insert would.

Without ``conn=`` a job with no unique key and no identity is one statement sent straight to
the driver, committing by itself (no ``Connection`` layer, no BEGIN and COMMIT round); with
``conn=`` it goes through SQLAlchemy in the caller's transaction. Both must write the same
stored values, column by column, and be read back the same.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, JobState, get_job
from kickside_engine.job_row import build_row
from kickside_engine.store.inserts import insert_job_autocommit

from .test_enqueue_many_rows import AWKWARD

NOW = datetime(2026, 12, 3, 10, 30, 15, 123456, tzinfo=UTC)


def _builders() -> list[JobBuilder]:
    plain = JobBuilder("noop", {})
    rich = (
        JobBuilder("echo", {"texts": AWKWARD, "nested": {"n": 1.5, "none": None, "ok": True}})
        .queue("mail")
        .priority(3)
        .max_attempts(7)
        .tags(["a", "ünïcødé"])
        .meta({"origin": "tab\there"})
        .concurrency_key("account-9")
    )
    return [plain, rich, rich.schedule_in(timedelta(minutes=5))]


def _stored(db: Database, job_id: object) -> dict[str, object]:
    """The row as the driver gives it back: no type of SQLAlchemy's converts it."""
    table = db.tables.job
    with db.read() as conn:
        row = conn.execute(
            sa.select(sa.text("*")).select_from(table).where(table.c.id == job_id)
        ).one()
    return dict(row._mapping)


@pytest.mark.parametrize("which", ["plain", "rich", "scheduled"])
def test_a_single_enqueue_stores_what_a_transactions_insert_stores(
    db: Database, which: str
) -> None:
    builder = _builders()[["plain", "rich", "scheduled"].index(which)]
    fast = builder.insert(db, now=NOW)
    with db.begin() as conn:
        slow = builder.insert(db, conn=conn, now=NOW)
    assert (
        fast.state
        is slow.state
        is (JobState.SCHEDULED if which == "scheduled" else JobState.AVAILABLE)
    )
    fast_row, slow_row = _stored(db, fast.id), _stored(db, slow.id)
    assert fast_row.pop("id") != slow_row.pop("id")
    assert fast_row == slow_row
    fast_job, slow_job = get_job(db, fast.id), get_job(db, slow.id)
    assert fast_job is not None and slow_job is not None
    assert dataclasses.replace(fast_job, id=slow_job.id) == slow_job
    assert fast_job.inserted_at == NOW


def test_a_failed_single_enqueue_writes_nothing_and_the_next_one_lands(db: Database) -> None:
    """A write the database refuses is the driver's error as SQLAlchemy raises it, and the
    connection it ran on serves the next enqueue."""
    inserted = JobBuilder("noop", {}).insert(db, now=NOW)
    with pytest.raises(sa.exc.IntegrityError):
        # The same id again: the fast path's INSERT hits the primary key.
        row = build_row(JobBuilder("noop", {}).options, NOW)
        row["id"] = inserted.id
        insert_job_autocommit(db, row)
    after = JobBuilder("noop", {}).insert(db, now=NOW)
    assert get_job(db, after.id) is not None
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar() == 2
