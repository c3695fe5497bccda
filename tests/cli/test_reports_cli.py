"""Reports: capacity (and setting it), stats, explain, doctor, cron and prune."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, list_audit, pause_queue
from kickside_engine.plugins.cron import Recurring, SchedulePublication, cron_tick
from kickside_engine.store.nodes import NodeBeat, heartbeat
from kickside_engine.store.settings import get_settings
from kickside_engine.testing import drain_jobs
from kickside_engine.workers import CapacityDeclaration
from kickside_tui.cli import confirm
from kickside_tui.cli.main import app
from kickside_tui.demo import marker

from ..conftest import Target
from ..support.workers import registry

runner = CliRunner()

#: The schedule `kickside cron --app tests.cli.test_reports_cli` reads.
SCHEDULE = [
    Recurring("every_minute", "* * * * *", lambda: JobBuilder("ok", {})),
    Recurring("nightly", "30 2 * * *", lambda: JobBuilder("ok", {}), timezone="Europe/Berlin"),
]
NOT_A_SCHEDULE = 42


def cli(target: Target, *args: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *args])


def cli_json(target: Target, *args: str) -> Any:
    result = cli(target, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def capped(key: str) -> JobBuilder:
    return JobBuilder(
        "ok", {}, capacity=CapacityDeclaration("exports", "caps.exports")
    ).concurrency_key(key)


def test_capacity_shows_groups_and_set_writes_both_limits(db: Database, target: Target) -> None:
    enqueue(db, capped("t1"))
    (group,) = cli_json(target, "capacity")["groups"]
    assert group["group"] == "exports" and group["problem"] and group["near_limit"] is True
    assert group["waiting"] == 1 and "invalid" in group["waiting_jobs"][0]["reason"]
    written = cli_json(
        target, "capacity", "set", "caps.exports", "--global-limit", "4", "--per-key-limit", "1"
    )
    assert written["settings"] == {"global_limit": 4, "concurrency_key_limit": 1}
    values = {s.key: (s.value, s.updated_by) for s in get_settings(db, "caps.exports")}
    assert values == {
        "global_limit": (4, Actor.current().user),
        "concurrency_key_limit": (1, Actor.current().user),
    }
    (group,) = cli_json(target, "capacity")["groups"]
    assert (group["global_limit"], group["per_key_limit"], group["problem"]) == (4, 1, None)
    assert "eligible" in group["waiting_jobs"][0]["reason"]
    assert [e.action for e in list_audit(db, target="caps.exports").entries] == ["capacity_set"]
    human = cli(target, "capacity")
    assert human.exit_code == 0 and "exports" in human.stdout
    negative = cli(
        target, "capacity", "set", "caps.exports", "--global-limit", "-1", "--per-key-limit", "1"
    )
    assert negative.exit_code == 2 and "global_limit" in negative.stderr


def test_capacity_set_refuses_a_typo_listing_the_namespaces_unless_create(
    db: Database, target: Target
) -> None:
    enqueue(db, capped("t1"))  # declares caps.exports
    typo = cli(
        target,
        "capacity",
        "set",
        "caps.exportz",
        "--global-limit",
        "4",
        "--per-key-limit",
        "1",
        "--json",
    )
    assert typo.exit_code == 3 and typo.stderr.count("\n") == 1
    assert "known namespaces: caps.exports" in typo.stderr and "--create" in typo.stderr
    assert json.loads(typo.stdout)["error"]["details"]["known"] == ["caps.exports"]
    assert get_settings(db, "caps.exportz") == [] and list_audit(db).entries == []
    made = cli(
        target,
        "capacity",
        "set",
        "caps.imports",
        "--global-limit",
        "4",
        "--per-key-limit",
        "1",
        "--create",
    )
    assert made.exit_code == 0 and "global_limit=4" in made.stdout
    assert len(get_settings(db, "caps.imports")) == 2


def test_a_limit_of_0_stops_the_group_so_it_asks_first(
    db: Database, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    enqueue(db, capped("t1"))
    argv = ["capacity", "set", "caps.exports", "--global-limit", "0", "--per-key-limit", "1"]
    refused = cli(target, *argv)  # no terminal, no --yes
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert "no job of the group is admitted" in refused.stderr
    monkeypatch.setattr(confirm, "interactive", lambda: True)
    declined = runner.invoke(app, [*target.cli_args(), *argv], input="\n")
    assert declined.exit_code == 1 and get_settings(db, "caps.exports") == []
    accepted = runner.invoke(app, [*target.cli_args(), *argv], input="y\n")
    assert accepted.exit_code == 0, accepted.output
    assert {s.key: s.value for s in get_settings(db, "caps.exports")}["global_limit"] == 0
    scripted = cli(
        target,
        "capacity",
        "set",
        "caps.exports",
        "--global-limit",
        "2",
        "--per-key-limit",
        "0",
        "--yes",
    )
    assert scripted.exit_code == 0
    raised = cli(
        target, "capacity", "set", "caps.exports", "--global-limit", "2", "--per-key-limit", "1"
    )  # admits work: nothing to confirm
    assert raised.exit_code == 0


def test_stats_counts_jobs_by_queue_and_state(db: Database, target: Target) -> None:
    enqueue(db, JobBuilder("ok", {}).queue("a"))
    enqueue(db, JobBuilder("ok", {}).queue("b"))
    drain_jobs(db, registry, queue="b")
    pause_queue(db, "a", Actor("alice", "ops"), utcnow())
    doc = cli_json(target, "stats")
    assert doc["totals"]["available"] == 1 and doc["totals"]["completed"] == 1
    assert doc["queues"]["b"]["completed"] == 1 and doc["paused_queues"] == ["a"]
    assert doc["completed_last_minute"] == 1 and doc["at"].endswith("Z")
    human = cli(target, "stats")
    assert human.exit_code == 0 and "(all)" in human.stdout


def test_explain_prints_one_reason_per_line(db: Database, target: Target) -> None:
    job_id = enqueue(db, JobBuilder("ok", {}).queue("quiet")).id
    pause_queue(db, "quiet", Actor("alice", "ops"), utcnow())
    doc = cli_json(target, "explain", str(job_id))
    codes = [r["code"] for r in doc["reasons"]]
    assert doc["state"] == "available" and "queue_paused" in codes and "no_live_node" in codes
    human = cli(target, "explain", str(job_id))
    lines = human.stdout.strip().splitlines()
    assert lines[0] == f"job {job_id} is available"
    assert len(lines) == 1 + len(codes) and lines[1].startswith("- ")


def test_doctor_exits_1_when_something_needs_attention(db: Database, target: Target) -> None:
    healthy = cli_json(target, "doctor")
    assert healthy["ok"] is True
    assert {f["check"] for f in healthy["findings"]} >= {"schema", "nodes", "queues", "notify"}
    enqueue(db, JobBuilder("ok", {}))  # available, and no node runs its queue
    result = cli(target, "doctor", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["ok"] is False
    assert {f["check"]: f["status"] for f in doc["findings"]}["queues"] == "warn"
    human = cli(target, "doctor")
    assert human.exit_code == 1 and "WARN  queues" in human.stdout


def test_doctor_reports_an_unmigrated_schema(target: Target) -> None:
    result = cli(target, "doctor", "--json")
    assert result.exit_code == 1
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["check"] == "schema" and finding["status"] == "fail"


def test_doctor_exits_5_when_the_database_is_unreachable() -> None:
    url = "postgresql+psycopg://deploy:not-a-password@127.0.0.1:1/db"
    result = runner.invoke(app, ["--database-url", url, "doctor", "--json"])
    assert result.exit_code == 5
    assert json.loads(result.stdout)["error"]["code"] == "database_unavailable"
    assert "not-a-password" not in result.stderr + result.stdout


def test_cron_shows_next_and_last_runs_from_the_app_schedule(db: Database, target: Target) -> None:
    (fired,) = cron_tick(db, SCHEDULE[:1], utcnow())
    doc = cli_json(target, "cron", "--app", "tests.cli.test_reports_cli")
    entries = {e["key"]: e for e in doc["entries"]}
    assert entries["every_minute"]["last_job_id"] == str(fired.job_id)
    assert entries["every_minute"]["next_run"].endswith("Z")
    assert entries["every_minute"]["nodes"] == []  # no running node publishes it
    assert entries["nightly"]["timezone"] == "Europe/Berlin"
    assert entries["nightly"]["next_run"].endswith(("00:30:00Z", "01:30:00Z"))  # 02:30 local
    human = cli(target, "cron", "--app", "tests.cli.test_reports_cli")
    assert human.exit_code == 0 and "every_minute" in human.stdout
    for app_name in (
        "tests.cli.test_reports_cli:NOT_A_SCHEDULE",
        "tests.cli.no_such_module",
        "tests.support.bad_cron_app",
    ):
        bad = cli(target, "cron", "--app", app_name)
        assert bad.exit_code == 2 and bad.stderr.count("\n") == 1


def test_cron_without_app_shows_what_the_running_nodes_publish(
    db: Database, target: Target
) -> None:
    bare = cli(target, "cron", "--json")
    assert bare.exit_code == 0 and json.loads(bare.stdout) == {
        "source": "running nodes",
        "entries": [],
    }
    assert "no running node publishes a cron entry" in bare.stderr and "--app" in bare.stderr
    now = utcnow()
    published = SchedulePublication(SCHEDULE).document(now)
    heartbeat(
        db, NodeBeat("web-1", "h", 1, {"default": 1}, None, 0, 1, now, schedule=published), now
    )
    (fired,) = cron_tick(db, SCHEDULE[:1], now)
    doc = cli_json(target, "cron")
    assert doc["source"] == "running nodes"
    every, nightly = doc["entries"]
    assert (every["key"], every["nodes"], every["worker"]) == ("every_minute", ["web-1"], "ok")
    assert every["last_job_id"] == str(fired.job_id)
    assert (nightly["key"], nightly["timezone"]) == ("nightly", "Europe/Berlin")
    human = cli(target, "cron")
    assert human.exit_code == 0 and "web-1" in human.stdout and "Europe/Berlin" in human.stdout


def test_cron_without_app_shows_the_demos_schedule_only_over_the_demos_database(
    db: Database, target: Target
) -> None:
    from kickside_tui.demo.workload import SCHEDULE as DEMO

    marker.mark(db, [e.key for e in DEMO], Actor("demo", "host"), utcnow())
    doc = cli_json(target, "cron")
    assert doc["source"].startswith("the demo")
    assert [e["key"] for e in doc["entries"]] == [e.key for e in DEMO]
    human = cli(target, "cron")
    assert human.exit_code == 0 and DEMO[0].key in human.stdout
    assert "schedule: the demo" in human.stderr


def test_prune_refuses_without_yes_then_deletes_old_final_jobs(
    db: Database, target: Target
) -> None:
    done = enqueue(db, JobBuilder("ok", {})).id
    drain_jobs(db, registry)
    waiting = enqueue(db, JobBuilder("ok", {}).schedule_in(timedelta(hours=1))).id
    assert cli(target, "prune", "--older-than-days", "0").exit_code == 2
    assert get_job(db, done) is not None
    kept = cli_json(target, "prune", "--yes")
    assert kept["deleted"] == 0  # finished moments ago: younger than 7 days
    doc = cli_json(target, "prune", "--older-than-days", "0", "--yes")
    assert doc == {"deleted": 1, "older_than_days": 0}
    assert get_job(db, done) is None and get_job(db, waiting) is not None
    assert [e.details["deleted"] for e in list_audit(db, action="prune").entries] == [1, 0]
