"""A lease per queue: how it is configured, and the lease keeper renewing and fencing each job
by its own queue's lease."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, claim, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.runtime import PoolConfig, parse_duration, parse_queue_leases
from kickside_engine.runtime.supervision import LeaseKeeper, safe_for
from kickside_tui.cli.main import app

from ..conftest import Target

NODE = "lease-keeper"
SHORT, LONG = timedelta(seconds=6), timedelta(minutes=5)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("1d", 86400),
        ("1m30s", 90),
        ("90", 90),
        ("2.5", 2.5),
        (" 10S ", 10),
        ("0.5m", 30),
    ],
)
def test_durations_read_with_or_without_a_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5 m", "5x", "m", "-3s", "0", "nan", "inf", "1e400", "s5"])
def test_a_bad_duration_is_refused_with_what_was_given(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match="invalid --lease"):
        parse_duration(text, "--lease")


def test_queue_leases_read_as_queue_equals_duration() -> None:
    assert parse_queue_leases("reports=5m, exports=1h,") == {
        "reports": timedelta(minutes=5),
        "exports": timedelta(hours=1),
    }
    for bad, message in [
        ("reports", "use queue=duration"),
        ("=5m", "use queue=duration"),
        ("reports=soon", "invalid lease for queue 'reports'"),
        ("bad queue!=5m", "queue"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            parse_queue_leases(bad)


def test_a_pool_takes_each_queues_own_lease_and_checks_them() -> None:
    config = PoolConfig(
        queues={"default": 2, "reports": 1},
        mode="thread",
        app="tests.support.pool_app",
        lease=SHORT,
        queue_leases={"reports": LONG},
    )
    assert config.lease_for("reports") == LONG
    assert config.lease_for("default") == SHORT
    base: dict[str, Any] = {"queues": {"default": 1}, "mode": "thread", "app": "x"}
    for options, message in [
        ({"queue_leases": {"reprots": LONG}}, "queue 'reprots', which this pool does not run"),
        ({"queue_leases": {"default": timedelta(seconds=2)}}, "queue 'default' must be from 3"),
        ({"queue_leases": {"default": timedelta(days=2)}}, "queue 'default' must be from 3"),
        ({"lease": timedelta(seconds=1)}, "lease must be from 3 seconds to 1 day, got 1s"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            PoolConfig(**base, **options)


def test_the_keeper_renews_and_fences_each_job_by_its_own_lease(db: Database) -> None:
    t0 = utcnow()
    quick = enqueue(db, JobBuilder("ok", {}), now=t0)
    report = enqueue(db, JobBuilder("ok", {}).queue("reports"), now=t0)
    (quick_claim,) = claim(db, queue="default", node=NODE, now=t0, lease=SHORT)
    (report_claim,) = claim(db, queue="reports", node=NODE, now=t0, lease=LONG)
    keeper = LeaseKeeper(db, NODE, timedelta(seconds=30))
    since = time.monotonic()
    keeper.track(quick_claim.lease_token, since, SHORT)
    keeper.track(report_claim.lease_token, since, LONG)
    assert keeper.fence_due == pytest.approx(since + safe_for(SHORT))

    # Renewal comes every third of the shortest lease held, for every job.
    before = utcnow()
    assert keeper.maintain(since + SHORT.total_seconds() / 3) == set()
    after = utcnow()
    assert _expires_within(db, quick.id, before + SHORT, after + SHORT)
    assert _expires_within(db, report.id, before + LONG, after + LONG)

    # Cut off from the database, the short lease may run out long before the long one: only
    # its job is stopped.
    late = keeper.fence_due + 0.01
    assert keeper.overdue(late) == {quick_claim.lease_token}
    assert keeper.overdue(late + 60) == set()
    renewed_at = max(keeper.held_until.values()) - safe_for(LONG)
    assert keeper.overdue(renewed_at + safe_for(LONG)) == {report_claim.lease_token}


def _expires_within(db: Database, job_id: Any, low: datetime, high: datetime) -> bool:
    job = get_job(db, job_id)
    assert job is not None and job.lease_expires_at is not None
    return low <= job.lease_expires_at <= high


@pytest.fixture
def kickside_logger() -> Iterator[None]:
    """The ``kickside`` logger as it was: ``kickside worker`` configures its own output."""
    logger = logging.getLogger("kickside")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    try:
        yield
    finally:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate


@pytest.mark.usefixtures("kickside_logger")
def test_the_worker_command_refuses_bad_leases_in_one_line(db: Database, target: Target) -> None:
    runner = CliRunner()
    base = [*target.cli_args(), "worker", "--app", "tests.support.pool_app"]
    for options, message in [
        (["--queue-leases", "reports"], "invalid queue lease 'reports': use queue=duration"),
        (["--lease", "2s"], "lease must be from 3 seconds to 1 day, got 2s"),
        (["--lease", "soon"], "invalid --lease 'soon'"),
        (["--lease", "30s", "--lease-seconds", "30"], "give --lease or --lease-seconds"),
        (
            ["--queues", "default:1", "--queue-leases", "reports=5m"],
            "a lease is given for queue 'reports', which this pool does not run",
        ),
    ]:
        result = runner.invoke(app, [*base, *options])
        assert result.exit_code == 2, (options, result.output)
        assert message in result.stderr, (options, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
