"""Schedules as operators see them: loaded from an app, published by nodes, read back merged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from kickside_engine import ConfigurationError, Database, InvalidArgumentError, JobBuilder
from kickside_engine.control.schedules import (
    app_schedule,
    cron_status,
    load_schedule,
    running_schedule,
)
from kickside_engine.plugins.cron import Recurring, SchedulePublication, cron_tick
from kickside_engine.runtime import PoolConfig
from kickside_engine.store.nodes import NodeBeat, heartbeat

from ..support import cron_app
from ..support.workers import registry

NOW = datetime(2030, 1, 7, 10, 20, 0, tzinfo=UTC)
HOURLY = Recurring("cleanup", "@hourly", lambda: JobBuilder("cleanup", {}).queue("maintenance"))
NIGHTLY = Recurring(
    "nightly", "30 2 * * *", lambda: JobBuilder("report", {}), timezone="Europe/Berlin"
)


def _broken_job() -> JobBuilder:
    raise RuntimeError("no builder today (password=hunter2)")


def _publish(db: Database, node: str, entries: list[Recurring] | None, at: datetime) -> None:
    """What a pool's heartbeat writes (``None``: a pool of a version that publishes nothing)."""
    schedule = SchedulePublication(entries).document(at) if entries is not None else None
    heartbeat(
        db,
        NodeBeat(
            node, "host", 1, {"default": 1}, "v1", 0, 1, at - timedelta(hours=1), schedule=schedule
        ),
        at,
    )


def _publish_raw(db: Database, node: str, schedule: Any, at: datetime) -> None:
    heartbeat(db, NodeBeat(node, "host", 1, {}, "v1", 0, 1, at, schedule=schedule), at)


def test_a_node_publishes_each_entry_with_its_next_run_worker_and_queue() -> None:
    published = SchedulePublication([HOURLY, NIGHTLY, Recurring("bad", "@daily", _broken_job)])
    hourly, nightly, bad = published.document(NOW)
    assert hourly == {
        "key": "cleanup",
        "expression": "@hourly",
        "timezone": "UTC",
        "worker": "cleanup",
        "queue": "maintenance",
        "next_run": "2030-01-07T11:00:00+00:00",
    }
    assert nightly["timezone"] == "Europe/Berlin"
    assert nightly["next_run"] == "2030-01-08T01:30:00+00:00"  # 02:30 CET
    assert bad["worker"] is None and "RuntimeError" in bad["error"]
    assert "hunter2" not in bad["error"]  # redacted before it is published
    assert bad["next_run"] == "2030-01-08T00:00:00+00:00"
    later = published.document(NOW + timedelta(hours=1))  # the hour passed: computed again
    assert later[0]["next_run"] == "2030-01-07T12:00:00+00:00"
    assert SchedulePublication([]).document(NOW) == []


def test_running_schedule_merges_the_live_nodes_and_ignores_stale_ones(db: Database) -> None:
    _publish(db, "web-2", [HOURLY, NIGHTLY], NOW - timedelta(seconds=2))
    _publish(db, "web-1", [HOURLY], NOW - timedelta(seconds=5))
    _publish(
        db, "gone-1", [Recurring("retired", "@weekly", HOURLY.job)], NOW - timedelta(minutes=5)
    )
    _publish(db, "old-version", None, NOW)
    (fired,) = cron_tick(db, [HOURLY], datetime(2030, 1, 7, 10, 0, 10, tzinfo=UTC))
    cleanup, nightly = running_schedule(db, NOW)
    assert (cleanup.key, cleanup.expression, cleanup.timezone) == ("cleanup", "@hourly", "UTC")
    assert cleanup.nodes == ("web-1", "web-2")  # one row for both: the same definition
    assert (cleanup.worker, cleanup.queue) == ("cleanup", "maintenance")
    assert cleanup.next_run == datetime(2030, 1, 7, 11, 0, tzinfo=UTC)
    assert cleanup.last_run == datetime(2030, 1, 7, 10, 0, tzinfo=UTC)
    assert cleanup.last_job_id == fired.job_id and cleanup.error is None
    assert (nightly.key, nightly.timezone, nightly.nodes) == (
        "nightly",
        "Europe/Berlin",
        ("web-2",),
    )
    assert nightly.last_run is None and nightly.last_job_id is None
    assert nightly.next_run == datetime(2030, 1, 8, 1, 30, tzinfo=UTC)
    # The stale node's heartbeat is 5 minutes old: what it published does not count.
    assert running_schedule(db, NOW - timedelta(minutes=5))[-1].key == "retired"


def test_nodes_that_disagree_on_an_entry_show_each_definition(db: Database) -> None:
    _publish(db, "old", [HOURLY], NOW)
    _publish(db, "new", [Recurring("cleanup", "*/30 * * * *", HOURLY.job)], NOW)
    rows = running_schedule(db, NOW)
    assert [(r.expression, r.nodes) for r in rows] == [
        ("*/30 * * * *", ("new",)),
        ("@hourly", ("old",)),
    ]
    assert all("disagree" in (r.error or "") for r in rows)


def test_what_another_version_published_is_read_defensively(db: Database) -> None:
    _publish_raw(db, "a", {"not": "a list"}, NOW)
    _publish_raw(
        db,
        "b",
        [
            42,
            {"key": 7},
            {
                "key": "future",
                "expression": "@fortnightly",
                "next_run": "2030-01-21T00:00:00+00:00",
            },
        ],
        NOW,
    )
    (future,) = running_schedule(db, NOW)
    assert future.key == "future" and future.nodes == ("b",)
    assert future.next_run == datetime(2030, 1, 21, tzinfo=UTC)  # the node's own answer
    assert future.error is not None and "nickname" in future.error
    assert future.timezone == "UTC" and future.worker is None


def test_cron_status_of_a_given_schedule_says_which_nodes_run_each_entry(db: Database) -> None:
    _publish(db, "web-1", [HOURLY], NOW)
    cleanup, nightly = cron_status(db, [HOURLY, NIGHTLY], NOW)
    assert cleanup.nodes == ("web-1",) and nightly.nodes == ()
    assert nightly.timezone == "Europe/Berlin" and nightly.worker == "report"


def test_load_schedule_reads_a_module_attribute_or_fails_in_one_line() -> None:
    assert load_schedule("tests.support.cron_app") == tuple(cron_app.SCHEDULE)
    assert load_schedule("tests.support.cron_app:NIGHTLY") == cron_app.NIGHTLY
    problems = {
        "tests.support.cron_app:NOT_A_SCHEDULE": "is not a list of Recurring entries",
        "tests.support.cron_app:MISSING": "tests.support.cron_app:MISSING does not exist",
        "tests.support.no_such_module": "cannot import schedule module",
        "tests.support.bad_cron_app": "cron entry 'broken': invalid cron expression '61 * * * *'",
        "tests.support.pool_app": "tests.support.pool_app:SCHEDULE does not exist",
    }
    for spec, message in problems.items():
        with pytest.raises(ConfigurationError) as caught:
            load_schedule(spec)
        assert message in str(caught.value) and "\n" not in str(caught.value)


def test_app_schedule_is_the_modules_schedule_if_it_has_one() -> None:
    assert app_schedule("tests.support.cron_app") == tuple(cron_app.SCHEDULE)
    assert app_schedule("tests.support.cron_app:registry") == tuple(cron_app.SCHEDULE)
    assert app_schedule("tests.support.pool_app") == ()  # no SCHEDULE: no cron
    with pytest.raises(ConfigurationError, match="cannot import worker module"):
        app_schedule("tests.support.no_such_module")
    with pytest.raises(ConfigurationError, match="'broken'"):
        app_schedule("tests.support.bad_cron_app")


def test_pool_config_checks_its_schedule() -> None:
    config = PoolConfig(mode="thread", registry=registry, schedule=[HOURLY, NIGHTLY])
    assert config.schedule == (HOURLY, NIGHTLY)
    with pytest.raises(InvalidArgumentError, match="'cleanup': duplicate key"):
        PoolConfig(mode="thread", registry=registry, schedule=[HOURLY, HOURLY])
    with pytest.raises(InvalidArgumentError, match="list of Recurring"):
        PoolConfig(mode="thread", registry=registry, schedule="0 * * * *")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="not a Recurring"):
        PoolConfig(mode="thread", registry=registry, schedule=["0 * * * *"])  # type: ignore[list-item]
