"""A bulk insert stores every row exactly as built, whatever path it takes (COPY on
PostgreSQL from ``COPY_FROM_ROWS`` rows, INSERT below that and on SQLite)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa

from kickside_engine import (
    Database,
    InvalidArgumentError,
    JobBuilder,
    JobState,
    enqueue_many,
    get_job,
)
from kickside_engine.store.inserts import COPY_FROM_ROWS

AWKWARD = [
    "tab\there",
    "new\nline",
    "back\\slash \\N",
    "quote ' and \" and ,;|",
    "ünïcødé ✓ 日本語 🚀",
    "\r\n",
    "",
]


@pytest.mark.parametrize("count", [COPY_FROM_ROWS - 1, COPY_FROM_ROWS + 70])
def test_bulk_rows_round_trip_exactly(db: Database, count: int) -> None:
    builders = []
    for i in range(count):
        text = AWKWARD[i % len(AWKWARD)]
        b = (
            JobBuilder("echo", {"n": i, "text": text, "nested": {"list": [text, None, 1.5]}})
            .queue(f"q{i % 3}")
            .priority(i % 10)
            .max_attempts(1 + i % 5)
            .tags(["bulk", f"t{i % 4}"])
            .meta({"origin": text})
        )
        if i % 7 == 0:
            b = b.schedule_in(timedelta(hours=1))
        builders.append(b)
    inserted = enqueue_many(db, builders)
    assert len(inserted) == count
    for i, (ins, _) in enumerate(zip(inserted, builders, strict=True)):
        job = get_job(db, ins.id)
        assert job is not None
        text = AWKWARD[i % len(AWKWARD)]
        assert job.args == {"n": i, "text": text, "nested": {"list": [text, None, 1.5]}}
        assert job.queue == f"q{i % 3}" and job.priority == i % 10
        assert job.max_attempts == 1 + i % 5
        assert job.tags == ["bulk", f"t{i % 4}"] and job.meta["origin"] == text
        assert job.errors == [] and job.attempt == 0
        expected = JobState.SCHEDULED if i % 7 == 0 else JobState.AVAILABLE
        assert job.state is expected and ins.state is expected


def test_a_bad_job_deep_in_a_streamed_batch_writes_none(db: Database) -> None:
    """On PostgreSQL a large batch is validated while it streams: a bad job far into it still
    leaves no row behind, and says what was wrong."""
    good = [JobBuilder("echo", {"n": i}) for i in range(COPY_FROM_ROWS * 3)]
    bad = JobBuilder("echo", {"unstorable": {1, 2}})
    with pytest.raises(InvalidArgumentError, match="args cannot be stored as JSON"):
        enqueue_many(db, [*good, bad, *good])
    with db.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar() == 0
    assert len(enqueue_many(db, good)) == len(good)  # and the next batch goes in whole
