"""Cron: schedule parsing, due times, and exactly-once firing across nodes (both backends)."""

from __future__ import annotations

import logging
import threading
import zoneinfo
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from kickside_engine import Database, InvalidArgumentError, JobBuilder, JobState, get_job
from kickside_engine.control.schedules import cron_status
from kickside_engine.plugins.cron import (
    NICKNAMES,
    CronFire,
    Recurring,
    cron_tick,
    expand,
    next_run,
    previous_run,
    validate_schedule,
)

from ..conftest import Target

MONDAY_8AM = datetime(2030, 1, 7, 8, 0, tzinfo=UTC)


def at(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def digest() -> JobBuilder:
    return JobBuilder("digest", {"kind": "weekly"}).priority(5).tags(["digest"])


def cleanup() -> JobBuilder:
    return JobBuilder("cleanup")


WEEKLY = Recurring("weekly_digest", "0 8 * * MON", digest)
HOURLY = Recurring("cleanup", "0 * * * *", cleanup)


def _jobs(db: Database) -> list[sa.Row]:  # type: ignore[type-arg]
    with db.read() as conn:
        return list(conn.execute(sa.select(db.tables.job).order_by(db.tables.job.c.inserted_at)))


def _executions(db: Database) -> list[sa.Row]:  # type: ignore[type-arg]
    table = db.tables.recurring_execution
    with db.read() as conn:
        return list(conn.execute(sa.select(table).order_by(table.c.run_at, table.c.key)))


# --- due times ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "now", "previous", "following"),
    [
        ("0 8 * * MON", at(2030, 1, 9, 12, 0), at(2030, 1, 7, 8, 0), at(2030, 1, 14, 8, 0)),
        ("0 8 * * MON", at(2030, 1, 7, 7, 59, 59), at(2029, 12, 31, 8, 0), at(2030, 1, 7, 8, 0)),
        ("0 * * * *", at(2030, 1, 1, 10, 30), at(2030, 1, 1, 10, 0), at(2030, 1, 1, 11, 0)),
        ("*/15 * * * *", at(2030, 1, 1, 23, 59), at(2030, 1, 1, 23, 45), at(2030, 1, 2, 0, 0)),
        ("30 2 1 * *", at(2030, 3, 15, 0, 0), at(2030, 3, 1, 2, 30), at(2030, 4, 1, 2, 30)),
        ("0 0 29 2 *", at(2030, 1, 1, 0, 0), at(2028, 2, 29, 0, 0), at(2032, 2, 29, 0, 0)),
    ],
)
def test_previous_and_next_run(
    cron: str, now: datetime, previous: datetime, following: datetime
) -> None:
    assert previous_run(cron, now) == previous
    assert next_run(cron, now) == following
    assert previous_run(cron, now).tzinfo is not None


def test_an_occurrence_exactly_at_now_is_the_previous_run_and_not_the_next() -> None:
    assert previous_run("0 8 * * MON", MONDAY_8AM) == MONDAY_8AM
    assert previous_run("0 8 * * MON", MONDAY_8AM + timedelta(microseconds=1)) == MONDAY_8AM
    assert previous_run("0 8 * * MON", MONDAY_8AM - timedelta(microseconds=1)) == at(
        2029, 12, 31, 8, 0
    )
    assert next_run("0 8 * * MON", MONDAY_8AM) == at(2030, 1, 14, 8, 0)


def test_due_times_are_utc_whatever_the_zone_of_now() -> None:
    tokyo = MONDAY_8AM.astimezone(zoneinfo.ZoneInfo("Asia/Tokyo"))
    assert previous_run("0 8 * * MON", tokyo) == MONDAY_8AM
    with pytest.raises(InvalidArgumentError, match="now"):
        previous_run("0 8 * * MON", datetime(2030, 1, 7, 8, 0))


@pytest.mark.parametrize("bad", ["", "* * *", "61 * * * *", "0 8 * * FUNDAY", "0 0 30 2 *"])
def test_invalid_expressions_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="cron expression"):
        next_run(bad, MONDAY_8AM)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (lambda: Recurring("broken", "0 25 * * *", cleanup), r"'broken'.*invalid cron expression"),
        (lambda: Recurring("nick", "@fortnightly", cleanup), r"'nick'.*unknown nickname"),
        (lambda: Recurring("boot", "@reboot", cleanup), r"'boot'.*unknown nickname"),
        (
            lambda: Recurring("mars", "0 8 * * *", cleanup, timezone="Mars/Olympus_Mons"),
            r"'mars'.*unknown timezone 'Mars/Olympus_Mons'",
        ),
        (
            lambda: Recurring("lower", "0 8 * * *", cleanup, timezone="utc"),
            r"unknown timezone 'utc'",
        ),
        (lambda: Recurring("", "0 0 * * *", cleanup), "key must be a non-empty string"),
        (lambda: Recurring("x", "0 0 * * *", "not callable"), "'x': job must be callable"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_entry_fails_when_the_schedule_is_built(
    entry: Callable[[], Recurring], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        entry()


def test_validate_schedule_names_the_bad_entry() -> None:
    validate_schedule([WEEKLY, HOURLY])
    with pytest.raises(InvalidArgumentError, match="'cleanup': duplicate key"):
        validate_schedule([HOURLY, Recurring("cleanup", "0 0 * * *", cleanup)])
    with pytest.raises(InvalidArgumentError, match="entry 1 is not a Recurring"):
        validate_schedule([HOURLY, "0 0 * * *"])  # type: ignore[list-item]


# --- nicknames and timezones -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("nickname", "following"),
    [
        ("@hourly", at(2030, 1, 9, 13, 0)),
        ("@daily", at(2030, 1, 10, 0, 0)),
        ("@midnight", at(2030, 1, 10, 0, 0)),
        ("@weekly", at(2030, 1, 13, 0, 0)),  # Sunday midnight
        ("@monthly", at(2030, 2, 1, 0, 0)),
        ("@yearly", at(2031, 1, 1, 0, 0)),
        ("@annually", at(2031, 1, 1, 0, 0)),
        ("@DAILY", at(2030, 1, 10, 0, 0)),
    ],
)
def test_nicknames_stand_for_their_expressions(nickname: str, following: datetime) -> None:
    entry = Recurring("nick", nickname, cleanup)
    assert entry.next_run(at(2030, 1, 9, 12, 30)) == following
    assert entry.previous_run(following) == following
    assert entry.cron == nickname  # shown as written
    assert expand(nickname) == NICKNAMES[nickname.lower()]


def test_an_expression_reads_in_its_timezone() -> None:
    berlin = Recurring("digest", "0 8 * * MON", digest, timezone="Europe/Berlin")
    # 08:00 in Berlin is 07:00 UTC in winter, 06:00 UTC in summer.
    assert berlin.next_run(at(2030, 1, 1)) == at(2030, 1, 7, 7, 0)
    assert berlin.next_run(at(2030, 7, 1)) == at(2030, 7, 1, 6, 0)
    assert berlin.previous_run(at(2030, 7, 1, 6, 0)) == at(2030, 7, 1, 6, 0)
    assert WEEKLY.timezone == "UTC" and WEEKLY.next_run(at(2030, 1, 1)) == MONDAY_8AM


def _fires_through(
    db: Database, entry: Recurring, start: datetime, end: datetime, every: timedelta
) -> list[datetime]:
    """Tick like a node (one tick every ``every``) from ``start`` to ``end``: the runs fired."""
    fired = []
    now = start
    while now <= end:
        fired += [f.run_at for f in cron_tick(db, [entry], now)]
        now += every
    return fired


def test_a_time_the_spring_forward_skips_runs_once_just_after_the_gap(db: Database) -> None:
    # 2030-03-31 in Europe/Berlin: 02:00 CET jumps to 03:00 CEST; 02:30 never happens that day.
    entry = Recurring("nightly", "30 2 * * *", cleanup, timezone="Europe/Berlin")
    gap_end, day_after = at(2030, 3, 31, 1, 0), at(2030, 4, 1, 0, 30)
    assert entry.next_run(at(2030, 3, 30, 12)) == gap_end  # 03:00 CEST, the first minute after
    assert entry.next_run(gap_end) == day_after  # 02:30 CEST again the next day
    assert entry.previous_run(at(2030, 3, 31, 12)) == gap_end
    fired = _fires_through(
        db, entry, at(2030, 3, 30, 23, 0), at(2030, 3, 31, 4, 0), timedelta(seconds=15)
    )
    assert fired == [gap_end]
    assert [e.run_at for e in _executions(db)] == [gap_end]


def test_a_time_the_fall_back_repeats_runs_once_at_its_first_pass(db: Database) -> None:
    # 2030-11-03 in America/New_York: 01:00-01:59 happens twice (EDT, then EST).
    entry = Recurring("nightly", "0 1 * * *", cleanup, timezone="America/New_York")
    first_pass, second_pass = at(2030, 11, 3, 5, 0), at(2030, 11, 3, 6, 0)
    assert entry.next_run(at(2030, 11, 2, 12)) == first_pass
    assert entry.next_run(first_pass) == at(2030, 11, 4, 6, 0)  # 01:00 EST the next day
    assert entry.next_run(second_pass) == at(2030, 11, 4, 6, 0)
    assert entry.previous_run(second_pass) == first_pass
    half = Recurring("half", "30 1 * * *", cleanup, timezone="America/New_York")
    # 01:15 EST, on the second pass: the last run was 01:30 EDT, the next is tomorrow's.
    assert half.previous_run(at(2030, 11, 3, 6, 15)) == at(2030, 11, 3, 5, 30)
    assert half.next_run(at(2030, 11, 3, 6, 15)) == at(2030, 11, 4, 6, 30)
    fired = _fires_through(
        db, entry, at(2030, 11, 3, 3, 0), at(2030, 11, 3, 8, 0), timedelta(seconds=15)
    )
    assert fired == [first_pass]


def test_an_hourly_entry_follows_real_hours_across_the_fall_back(db: Database) -> None:
    entry = Recurring("hourly", "@hourly", cleanup, timezone="America/New_York")
    fired = _fires_through(
        db, entry, at(2030, 11, 3, 4, 0), at(2030, 11, 3, 7, 30), timedelta(seconds=30)
    )
    assert fired == [at(2030, 11, 3, h, 0) for h in (4, 5, 6, 7)]  # 00, 01 EDT, 01, 02 EST


# --- ticks ----------------------------------------------------------------------------------


def test_cron_enqueues_the_entry_job_tagged_and_recorded(db: Database) -> None:
    (fire,) = cron_tick(db, [WEEKLY], MONDAY_8AM + timedelta(seconds=2))
    assert fire == CronFire("weekly_digest", MONDAY_8AM, fire.job_id)
    job = get_job(db, fire.job_id)
    assert job is not None and job.worker == "digest" and job.state is JobState.AVAILABLE
    assert job.tags == ["digest", "cron"] and job.meta == {"cron": "weekly_digest"}
    assert job.priority == 5 and job.args == {"kind": "weekly"}
    (execution,) = _executions(db)
    assert (execution.key, execution.run_at, execution.job_id) == (
        "weekly_digest",
        MONDAY_8AM,
        fire.job_id,
    )


def test_cron_fires_once_across_two_concurrent_ticks(db: Database, target: Target) -> None:
    handles = [target.open(), target.open()]
    now = MONDAY_8AM + timedelta(seconds=1)
    start = threading.Barrier(len(handles))

    def tick(handle: Database) -> list[CronFire]:
        start.wait(timeout=30)
        return cron_tick(handle, [WEEKLY, HOURLY], now)

    try:
        with ThreadPoolExecutor(len(handles)) as pool:
            fired = [f.result(timeout=120) for f in [pool.submit(tick, h) for h in handles]]
    finally:
        for handle in handles:
            handle.dispose()
    keys = sorted(f.key for fires in fired for f in fires)
    assert keys == ["cleanup", "weekly_digest"]  # each run once, whichever node won it
    jobs = _jobs(db)
    assert sorted(j.meta["cron"] for j in jobs) == ["cleanup", "weekly_digest"]
    assert len(_executions(db)) == 2
    assert cron_tick(db, [WEEKLY, HOURLY], now + timedelta(seconds=30)) == []
    assert len(_jobs(db)) == 2


def test_cron_skips_a_due_time_more_than_a_minute_old(db: Database) -> None:
    # A node booting at 09:40 does not replay the 08:00 run.
    assert cron_tick(db, [WEEKLY], at(2030, 1, 7, 9, 40)) == []
    assert cron_tick(db, [WEEKLY], MONDAY_8AM + timedelta(seconds=61)) == []
    assert _jobs(db) == [] and _executions(db) == []
    (fire,) = cron_tick(db, [WEEKLY], MONDAY_8AM + timedelta(seconds=60))
    assert fire.run_at == MONDAY_8AM


def test_cron_fires_again_at_the_next_occurrence(db: Database) -> None:
    ten = at(2030, 1, 1, 10, 0)
    assert [f.run_at for f in cron_tick(db, [HOURLY], ten)] == [ten]
    assert cron_tick(db, [HOURLY], ten + timedelta(seconds=30)) == []
    assert cron_tick(db, [HOURLY], ten + timedelta(minutes=30)) == []
    eleven = ten + timedelta(hours=1)
    assert [f.run_at for f in cron_tick(db, [HOURLY], eleven + timedelta(seconds=5))] == [eleven]
    assert [(e.key, e.run_at) for e in _executions(db)] == [("cleanup", ten), ("cleanup", eleven)]
    assert len(_jobs(db)) == 2


def test_an_entry_whose_due_time_cannot_be_computed_is_logged_and_skipped(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    broken = Recurring("broken", "0 8 * * MON", cleanup)
    object.__setattr__(broken, "cron", "0 25 * * *")  # e.g. an entry altered after it was built
    with caplog.at_level(logging.ERROR, logger="kickside.plugins.cron"):
        fired = cron_tick(db, [broken, WEEKLY], MONDAY_8AM)
    assert [f.key for f in fired] == ["weekly_digest"]
    (logged,) = [r for r in caplog.records if r.name == "kickside.plugins.cron"]
    assert logged.levelno == logging.ERROR and "'broken'" in logged.getMessage()
    assert [e.key for e in _executions(db)] == ["weekly_digest"]


def test_an_entry_whose_job_cannot_be_built_leaves_no_trace(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    bad_queue = Recurring("bad_queue", "* * * * *", lambda: JobBuilder("ok").queue("no spaces!"))
    with caplog.at_level(logging.ERROR, logger="kickside.plugins.cron"):
        fired = cron_tick(db, [bad_queue, HOURLY], at(2030, 1, 1, 10, 0))
    assert [f.key for f in fired] == ["cleanup"]
    assert any("'bad_queue'" in r.getMessage() for r in caplog.records)
    assert [e.key for e in _executions(db)] == ["cleanup"]  # retried on the next tick


def test_cron_status_shows_next_and_last_runs(db: Database) -> None:
    cron_tick(db, [HOURLY], at(2030, 1, 1, 10, 0))
    (latest,) = cron_tick(db, [HOURLY], at(2030, 1, 1, 11, 0, 30))
    now = at(2030, 1, 1, 11, 20)
    hourly, weekly = cron_status(db, [HOURLY, WEEKLY], now)
    assert (hourly.key, hourly.expression, hourly.timezone) == ("cleanup", "0 * * * *", "UTC")
    assert (hourly.worker, hourly.queue) == ("cleanup", "default")
    assert hourly.next_run == at(2030, 1, 1, 12, 0)
    assert hourly.last_run == at(2030, 1, 1, 11, 0) and hourly.last_job_id == latest.job_id
    assert hourly.error is None and hourly.nodes == ()  # no running node publishes it
    assert weekly.next_run == MONDAY_8AM and weekly.last_run is None
    assert weekly.last_job_id is None
