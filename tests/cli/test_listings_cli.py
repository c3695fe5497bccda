"""Listings: slots, leases, queues (pause/resume), nodes and the audit trail."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, claim, enqueue
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, list_audit, list_queues
from kickside_engine.slots import park_job
from kickside_engine.store.nodes import NodeBeat, heartbeat
from kickside_tui.cli import confirm
from kickside_tui.cli.main import app

from ..conftest import Target

runner = CliRunner()


def cli(target: Target, *args: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *args])


def cli_json(target: Target, *args: str) -> Any:
    result = cli(target, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_slots_filter_by_namespace_and_scope(db: Database, target: Target) -> None:
    a = enqueue(db, JobBuilder("ok", {}).slot("sync", "t:1", "a")).id
    enqueue(db, JobBuilder("ok", {}).slot("sync", "t:2", "b"))
    enqueue(db, JobBuilder("ok", {}).slot("mail", "t:1", "c"))
    park_job(db, a)
    every = cli_json(target, "slots")["slots"]
    assert [(s["namespace"], s["scope"], s["key"]) for s in every] == [
        ("mail", "t:1", "c"),
        ("sync", "t:1", "a"),
        ("sync", "t:2", "b"),
    ]
    (only,) = cli_json(target, "slots", "--namespace", "sync", "--scope", "t:1")["slots"]
    assert only["job_id"] == str(a) and only["state"] == "parked" and only["due"] is False
    human = cli(target, "slots", "--namespace", "sync")
    assert human.exit_code == 0 and "parked" in human.stdout and "t:2" in human.stdout


def test_leases_show_node_expiry_and_time_over_max_execution(db: Database, target: Target) -> None:
    long_ago = utcnow() - timedelta(minutes=10)
    slow = enqueue(db, JobBuilder("ok", {}).max_execution(timedelta(seconds=60)), now=long_ago)
    claim(db, queue="default", node="n1", now=long_ago, lease=timedelta(seconds=30))
    enqueue(db, JobBuilder("ok", {}))
    doc = cli_json(target, "leases")
    (lease,) = doc["leases"]
    assert lease["job_id"] == str(slow.id) and lease["node"] == "n1"
    assert lease["lease_expired"] is True and lease["over_max_execution"] is True
    assert lease["max_execution_seconds"] == 60 and lease["elapsed_seconds"] >= 599
    human = cli(target, "leases")
    assert "over max execution" in human.stdout and "lease expired" in human.stdout


def test_queues_pause_and_resume_are_audited(db: Database, target: Target) -> None:
    enqueue(db, JobBuilder("ok", {}).queue("mailers"))
    (mailers,) = cli_json(target, "queues")["queues"]
    assert mailers["name"] == "mailers" and mailers["counts"]["available"] == 1
    assert mailers["paused"] is False and mailers["no_node"] is True
    paused = cli_json(target, "queues", "pause", "mailers", "--yes")["queue"]
    assert paused["paused"] is True and paused["paused_by"] == str(Actor.current())
    assert "jobs waiting" in cli(target, "queues").stdout
    resumed = cli_json(target, "queues", "resume", "mailers")["queue"]
    assert resumed["paused"] is False
    actions = [e.action for e in list_audit(db, target="mailers").entries]
    assert actions == ["resume", "pause"]


def test_an_unknown_queue_is_refused_listing_the_known_ones_unless_create(
    db: Database, target: Target
) -> None:
    enqueue(db, JobBuilder("ok", {}).queue("mailers"))
    heartbeat(db, NodeBeat("n1", "h", 1, {"billing": 2}, "v1", 0, 2, utcnow()), utcnow())
    for verb in (["pause", "--yes"], ["resume"]):
        typo = cli(target, "queues", *verb, "mailrs", "--json")
        assert typo.exit_code == 3, typo.output
        error = json.loads(typo.stdout)["error"]  # the one error document, on stdout
        assert error["code"] == "not_found" and error["exit_code"] == 3
        assert error["details"]["known"] == ["billing", "mailers"]  # jobs, or a live node
        assert "known queues: billing, mailers" in typo.stderr and typo.stderr.count("\n") == 1
    assert "--create" in cli(target, "queues", "pause", "mailrs", "--yes").stderr
    assert [q.name for q in list_queues(db, utcnow())] == ["mailers"]  # nothing was created
    # A queue only a live node runs is known; --create pauses a queue nothing uses yet.
    assert cli_json(target, "queues", "pause", "billing", "--yes")["queue"]["paused"] is True
    assert cli_json(target, "queues", "pause", "later", "--create", "--yes")["queue"]["paused"]
    assert [q.name for q in list_queues(db, utcnow())] == ["billing", "later", "mailers"]
    bad = cli(target, "queues", "pause", "")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1


def test_pausing_asks_first_and_names_the_live_nodes_that_stop(
    db: Database, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    enqueue(db, JobBuilder("ok", {}).queue("mailers"))
    heartbeat(db, NodeBeat("web-1", "h", 1, {"mailers": 4}, "v1", 0, 4, utcnow()), utcnow())
    refused = cli(target, "queues", "pause", "mailers")  # no terminal, no --yes
    assert refused.exit_code == 2 and "--yes" in refused.stderr and "web-1" in refused.stderr
    monkeypatch.setattr(confirm, "interactive", lambda: True)
    declined = runner.invoke(app, [*target.cli_args(), "queues", "pause", "mailers"], input="n\n")
    assert declined.exit_code == 1 and "Live nodes web-1 stop claiming" in declined.stderr
    assert not list_queues(db, utcnow())[0].paused
    accepted = runner.invoke(app, [*target.cli_args(), "queues", "pause", "mailers"], input="y\n")
    assert accepted.exit_code == 0 and accepted.stdout == "queue mailers is paused\n"
    assert list_queues(db, utcnow())[0].paused
    again = cli(target, "queues", "pause", "mailers")  # paused already: nothing to confirm
    assert again.exit_code == 0


def test_nodes_list_heartbeats_and_stale_pools(db: Database, target: Target) -> None:
    now = utcnow()
    for name, beat_at in (("fresh", now), ("gone", now - timedelta(minutes=5))):
        heartbeat(
            db,
            NodeBeat(name, "host-1", 42, {"default": 10}, "v1", 1, 4, now - timedelta(hours=1)),
            beat_at,
        )
    nodes = {n["name"]: n for n in cli_json(target, "nodes")["nodes"]}
    assert nodes["fresh"]["stale"] is False and nodes["gone"]["stale"] is True
    assert nodes["fresh"]["queues"] == {"default": 10}
    assert nodes["gone"]["heartbeat_age"] >= 300
    # Neither published its executors by kind (an older pool): process executors, busy/total.
    assert nodes["fresh"]["executors"] == [
        {"kind": "process", "executors": 4, "busy": 1, "slots": 4}
    ]
    human = cli(target, "nodes")
    assert human.exit_code == 0 and "default:10" in human.stdout
    assert "process 1/4" in human.stdout


def test_nodes_show_executors_by_kind_with_busy_and_total_slots(
    db: Database, target: Target
) -> None:
    now = utcnow()
    kinds = [
        {"kind": "process", "executors": 8, "busy": 3, "slots": 8},
        {"kind": "async", "executors": 1, "busy": 120, "slots": 200},
    ]
    heartbeat(db, NodeBeat("web-1", "h", 1, {"io": 200}, "v1", 4, 9, now, executors=kinds), now)
    [node] = cli_json(target, "nodes")["nodes"]
    assert node["executors"] == kinds
    assert (node["executors_busy"], node["executors_total"]) == (4, 9)
    human = cli(target, "nodes")
    assert human.exit_code == 0 and "process 3/8, async 120/200" in human.stdout


def test_audit_lists_actions_newest_first_with_paging(db: Database, target: Target) -> None:
    for name in ("q1", "q2", "q3"):
        cli_json(target, "queues", "pause", name, "--create", "--yes")
    page = cli_json(target, "audit", "--limit", "2", "--action", "pause")
    assert [e["target"] for e in page["entries"]] == ["q3", "q2"]
    assert page["entries"][0]["actor"] == Actor.current().user
    rest = cli_json(target, "audit", "--cursor", page["next_cursor"])
    assert [e["target"] for e in rest["entries"]] == ["q1"] and rest["next_cursor"] is None
    assert cli(target, "audit", "--cursor", "zzz").exit_code == 2
