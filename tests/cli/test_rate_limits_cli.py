"""`kickside capacity` with rate limits: set them (validated N/unit syntax), show usage against
each limit (table and --json), and `kickside explain` names a key at its rate."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, claim, enqueue
from kickside_engine.control import list_audit
from kickside_engine.store.settings import get_settings
from kickside_engine.workers import CapacityDeclaration
from kickside_tui.cli.main import app

from ..conftest import Target

runner = CliRunner()
NS = "caps.stripe"


def cli(target: Target, *args: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *args])


def cli_json(target: Target, *args: str) -> Any:
    result = cli(target, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def rated(key: str) -> JobBuilder:
    return JobBuilder("ok", {}, capacity=CapacityDeclaration("stripe", NS)).concurrency_key(key)


def settings(db: Database) -> dict[str, Any]:
    return {s.key: s.value for s in get_settings(db, NS)}


def _early_in_a_minute() -> None:
    """Rate windows are clock minutes and hours: start in a minute's first 45 s, so that the
    claims and the reads of their usage fall in one window (a read just past a minute's end
    saw the new window's 0 once, under CI load)."""
    now = datetime.now(UTC)
    second = now.second + now.microsecond / 1e6
    if second > 45:
        time.sleep(60.1 - second)


def test_capacity_set_writes_rates_and_shows_usage_against_each(
    db: Database, target: Target
) -> None:
    _early_in_a_minute()
    for key in ("acct-1", "acct-1", "acct-1", "acct-2"):
        enqueue(db, rated(key))
    written = cli_json(
        target,
        "capacity",
        "set",
        NS,
        "--global-limit",
        "10",
        "--per-key-limit",
        "10",
        "--rate-limit",
        "600/min",
        "--rate-limit-per-key",
        "2/h",
    )
    assert written["settings"] == {
        "global_limit": 10,
        "concurrency_key_limit": 10,
        "rate_limit": "600/min",
        "rate_limit_per_key": "2/h",
    }
    assert settings(db) == written["settings"]
    assert len(claim(db, queue="default", node="n1", limit=10)) == 3  # acct-1 twice, acct-2
    (group,) = cli_json(target, "capacity")["groups"]
    assert (group["rate_limit"], group["rate_used"]) == ("600/min", 3)
    assert group["rate_limit_per_key"] == "2/h"
    assert group["rate_used_per_key"] == {"acct-1": 2, "acct-2": 1}
    assert group["rate_key_window_ends_at"].endswith(":00:00Z")
    (waiting,) = group["waiting_jobs"]
    assert waiting["reason"].startswith("rate for key acct-1 reached (2/2 this hour)")
    human = cli(target, "capacity")
    assert human.exit_code == 0, human.output
    assert "3/600 per min" in human.stdout and "rate for key acct-1" in human.stdout
    explained = cli(target, "explain", str(waiting["job_id"]))
    assert explained.exit_code == 0, explained.output
    assert "rate for key acct-1 reached (2/2 this hour), next admission at" in explained.stdout


def test_capacity_set_changes_one_rate_alone_and_none_removes_it(
    db: Database, target: Target
) -> None:
    enqueue(db, rated("a"))
    done = cli(target, "capacity", "set", NS, "--rate-limit-per-key", " 60/min")
    assert done.exit_code == 0, done.output
    assert "rate_limit_per_key=60/min" in done.stdout
    assert settings(db) == {"rate_limit_per_key": "60/min"}
    removed = cli_json(target, "capacity", "set", NS, "--rate-limit-per-key", "none")
    assert removed["settings"] == {"rate_limit_per_key": None} and settings(db) == {}
    assert [e.details for e in list_audit(db, action="capacity_set").entries] == [
        {"rate_limit_per_key": None},
        {"rate_limit_per_key": "60/min"},
    ]


def test_capacity_set_refuses_a_bad_rate_or_no_limit_in_one_line(
    db: Database, target: Target
) -> None:
    enqueue(db, rated("a"))
    for option, bad in (
        ("--rate-limit", "600/minute"),
        ("--rate-limit", "600"),
        ("--rate-limit-per-key", "-1/s"),
        ("--rate-limit-per-key", "ten/s"),
    ):
        refused = cli(target, "capacity", "set", NS, option, bad)
        assert refused.exit_code == 2, refused.output
        assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
        assert f"{option}: rate limit must be N/unit" in refused.stderr and bad in refused.stderr
    nothing = cli(target, "capacity", "set", NS)
    assert nothing.exit_code == 2 and "give at least one of --global-limit" in nothing.stderr
    zero = cli(target, "capacity", "set", NS, "--rate-limit", "0/min")  # stops the group
    assert zero.exit_code == 2 and "--yes" in zero.stderr and "--rate-limit at 0" in zero.stderr
    assert settings(db) == {} and list_audit(db).entries == []
    forced = cli(target, "capacity", "set", NS, "--rate-limit", "0/min", "--yes")
    assert forced.exit_code == 0 and settings(db) == {"rate_limit": "0/min"}
