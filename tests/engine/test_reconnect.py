"""The retry schedule that pools, listeners and the dashboard follow when the database goes away."""

from __future__ import annotations

import logging
import random
import sqlite3
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from kickside_engine import Database, connect_database
from kickside_engine.errors import DatabaseUnavailableError, PermissionDeniedError
from kickside_engine.store.driver_errors import unavailable_reason
from kickside_engine.store.reconnect import Outage, RetryDelays, backoff_seconds, jittered

from ..conftest import Target

CLIENT = "kickside.test_client"


def test_the_schedule_doubles_from_its_base_to_its_cap() -> None:
    assert [backoff_seconds(n, 0.1, 5.0) for n in range(1, 9)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    )
    assert backoff_seconds(0, 0.1, 5.0) == 0.1  # a step before the first is the first
    assert backoff_seconds(3, 60.0, 15.0) == 60.0  # a cap below the base counts as the base
    assert backoff_seconds(10_000, 0.2, 15.0) == 15.0  # no overflow far past the cap


def test_jitter_only_ever_shortens_a_delay_by_up_to_its_fraction() -> None:
    rng = random.Random(7)
    draws = [jittered(10.0, 0.2, rng) for _ in range(2_000)]
    assert all(8.0 <= d <= 10.0 for d in draws)
    assert min(draws) < 8.2 and max(draws) > 9.8  # spread over the whole range, not fixed
    assert jittered(10.0, 0.0) == 10.0


def test_failures_in_a_row_back_off_and_a_success_starts_over() -> None:
    delays = RetryDelays(rng=random.Random(1))
    first = [delays.failed() for _ in range(8)]
    for n, wait in enumerate(first, start=1):
        top = backoff_seconds(n, 0.1, 5.0)
        assert 0.8 * top <= wait <= top, (n, first)
    assert delays.failures == 8
    delays.succeeded()
    assert delays.failures == 0
    assert 0.08 <= delays.failed() <= 0.1


# --- Outage: one line when the database goes, one when it is back ----------------------------


def _outage(clock: list[float]) -> Outage:
    return Outage(logging.getLogger(CLIENT), RetryDelays(rng=random.Random(3)), lambda: clock[0])


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == CLIENT and r.levelno >= level]


def test_an_outage_is_one_line_as_it_begins_and_one_as_it_ends_whatever_the_tries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [100.0]
    outage = _outage(clock)
    lost = DatabaseUnavailableError(
        "cannot reach postgresql://kickside:hunter2@db.internal/jobs: connection refused"
    )
    with caplog.at_level(logging.DEBUG, logger=CLIENT):
        waits = []
        for _ in range(30):
            waits.append(outage.failed(lost))
            clock[0] += waits[-1]
        assert outage.down
        outage.succeeded()
        outage.succeeded()
        outage.failed(lost)  # a new outage: the schedule and the lines start over
    for n, wait in enumerate(waits, start=1):
        assert 0.8 * backoff_seconds(n, 0.1, 5.0) <= wait <= backoff_seconds(n, 0.1, 5.0)
    shown = _records(caplog, logging.INFO)
    messages = [r.getMessage() for r in shown]
    assert messages[0].startswith("database unavailable, retrying in 0.1s: cannot reach ")
    assert "connection refused" in messages[0] and "hunter2" not in messages[0]
    assert messages[1] == f"database back after {sum(waits):.1f}s"
    assert messages[2].startswith("database unavailable, retrying in 0.1s: ")
    assert len(messages) == 3 and all(r.levelno == logging.WARNING for r in shown)
    assert all(r.exc_info is None for r in caplog.records)  # a lost database is no bug
    quiet = [r for r in caplog.records if r.name == CLIENT and r.levelno == logging.DEBUG]
    assert len(quiet) == 29  # every other try, for whoever runs at DEBUG
    assert all(r.getMessage().startswith("database still unavailable, retrying in") for r in quiet)


def test_errors_that_are_not_an_outage_are_logged_every_time_a_bug_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = [0.0]
    outage = _outage(clock)
    with caplog.at_level(logging.DEBUG, logger=CLIENT):
        for _ in range(2):
            outage.failed(_syntax_error())
            outage.failed(PermissionDeniedError("permission denied for table kickside_job"))
        assert not outage.down
        outage.succeeded()
    shown = _records(caplog, logging.INFO)
    assert [r.levelno for r in shown] == [logging.ERROR] * 4  # and no "database back"
    bugs, refusals = shown[0::2], shown[1::2]
    assert all(r.exc_info is not None and "unexpected error" in r.getMessage() for r in bugs)
    assert all(r.exc_info is None for r in refusals)
    assert refusals[0].getMessage().startswith("permission denied for table kickside_job")
    assert outage.delays.failures == 0  # the success started the schedule over


def _syntax_error() -> sa.exc.DBAPIError:
    engine = sa.create_engine("sqlite://")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELEKT 1"))
    except sa.exc.DBAPIError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError("SELEKT ran")


def test_what_counts_as_the_database_being_unavailable(tmp_path: Path) -> None:
    refused = connect_database("postgresql+psycopg://kickside@127.0.0.1:9/none")
    with pytest.raises(DatabaseUnavailableError) as lost, refused.read():
        pass
    assert unavailable_reason(lost.value) == str(lost.value)
    assert lost.value.__cause__ is not None  # SQLAlchemy's error, as the driver raised it
    assert "refused" in (unavailable_reason(lost.value.__cause__) or "")
    with pytest.raises(psycopg.OperationalError) as bare:  # a connection of one's own (LISTEN)
        psycopg.connect("host=127.0.0.1 port=9 dbname=none connect_timeout=5")
    assert "refused" in (unavailable_reason(bare.value) or "")
    assert unavailable_reason(_locked(tmp_path)) == "database is locked"
    # Errors that retrying alone will not cure are no outage.
    assert unavailable_reason(_syntax_error()) is None
    assert unavailable_reason(PermissionDeniedError("permission denied")) is None
    assert unavailable_reason(RuntimeError("connection refused")) is None


def _locked(tmp_path: Path) -> sa.exc.DBAPIError:
    """What a writer gets when another holds an SQLite file past the busy timeout."""
    path = tmp_path / "locked.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05})
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO t VALUES (1)"))
    except sa.exc.DBAPIError as exc:
        return exc
    finally:
        engine.dispose()
        holder.close()
    raise AssertionError("the insert did not wait for the lock")


def test_an_sqlite_table_that_does_not_exist_is_not_an_outage(target: Target) -> None:
    """SQLite reports a missing table as an OperationalError too: it is not a lost database."""
    db: Database = target.open()
    try:
        # Unmigrated: the driver's own error, not the handle's schema check, is the point.
        with pytest.raises(sa.exc.DBAPIError) as missing, db.read(check_schema=False) as conn:
            conn.execute(sa.text("SELECT * FROM no_such_table"))
        assert unavailable_reason(missing.value) is None
    finally:
        db.dispose()
