"""`kickside purge-slot`: one call by default; --until-done follows the continuation contract."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, RunOutcome, claim, complete, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import list_audit, list_runs
from kickside_tui.cli import purge
from kickside_tui.cli.main import app

from ..conftest import Target

runner = CliRunner()
IDENTITY = ["--namespace", "app.sync", "--scope", "tenant:1", "--key", "k1"]


def cli(target: Target, *args: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *args])


def enroll(db: Database) -> uuid.UUID:
    return enqueue(db, JobBuilder("ok", {}).slot("app.sync", "tenant:1", "k1")).id


def run_once(db: Database) -> None:
    """One real run of the slot: woken, claimed, completed."""
    enqueue(db, JobBuilder("ok", {}).slot("app.sync", "tenant:1", "k1", demand=True))
    (claimed,) = claim(db, queue="default", node="n1")
    assert complete(db, claimed, park=True)


def add_settled_runs(db: Database, job_id: uuid.UUID, count: int) -> None:
    """History as ``count`` finished runs would leave it (written directly, for speed)."""
    start = utcnow() - timedelta(days=1)
    with db.begin() as conn:
        conn.execute(
            sa.insert(db.tables.job_run),
            [
                {
                    "job_id": job_id, "attempt": 1, "queue": "default", "worker": "ok",
                    "node": "n1", "lease_token": uuid.uuid4(),
                    "started_at": start + timedelta(seconds=i),
                    "finished_at": start + timedelta(seconds=i, milliseconds=5),
                    "duration_ms": 5, "outcome": RunOutcome.COMPLETED.value,
                }
                for i in range(count)
            ],
        )


def test_one_call_by_default_exits_4_with_how_to_continue(db: Database, target: Target) -> None:
    job_id = enroll(db)
    run_once(db)
    add_settled_runs(db, job_id, 149)
    result = cli(target, "purge-slot", *IDENTITY, "--yes", "--json")
    assert result.exit_code == 4, result.output
    details = json.loads(result.stdout)["details"]
    assert details["needs_continue"] is True and details["runs_deleted"] == 100
    assert "more remain" in result.stderr and result.stderr.count("\n") == 1
    done = cli(target, "purge-slot", *IDENTITY, "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {  # the second call deleted the last 50 runs
        "namespace": "app.sync", "scope": "tenant:1", "key": "k1", "removed": 1,
        "runs_deleted": 50, "calls": 1,
    }
    assert get_job(db, job_id) is None


def test_until_done_purges_more_than_250_settled_runs(db: Database, target: Target) -> None:
    job_id = enroll(db)
    for _ in range(3):
        run_once(db)
    add_settled_runs(db, job_id, 260)
    assert len(list_runs(db, job_id)) == 263
    result = cli(target, "purge-slot", *IDENTITY, "--until-done", "--yes", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["removed"] == 1 and doc["runs_deleted"] == 263 and doc["calls"] == 3
    assert get_job(db, job_id) is None and list_runs(db, job_id) == []
    entries = list_audit(db, action="purge_slot").entries  # one per call, newest first
    assert len(entries) == 3
    assert {e.target for e in entries} == {"app.sync/tenant:1/k1"}
    assert entries[0].details == {"removed": 1, "runs_deleted": 63}
    assert [e.details["runs_deleted"] for e in entries[1:]] == [100, 100]


def test_one_call_that_removes_the_slot_says_how_many_runs_went(
    db: Database, target: Target
) -> None:
    job_id = enroll(db)
    run_once(db)
    add_settled_runs(db, job_id, 6)
    result = cli(target, "purge-slot", *IDENTITY, "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout == "purged slot app.sync/tenant:1/k1: 7 runs deleted\n"
    assert get_job(db, job_id) is None and list_runs(db, job_id) == []


def test_until_done_waits_for_the_lease_then_finishes(
    db: Database, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = enroll(db)
    add_settled_runs(db, job_id, 120)
    (claimed,) = claim(db, queue="default", node="n1")
    waits: list[float] = []

    def the_run_ends_while_we_wait(seconds: float) -> None:
        waits.append(seconds)
        assert complete(db, claimed)

    monkeypatch.setattr(purge, "wait", the_run_ends_while_we_wait)
    result = cli(target, "purge-slot", *IDENTITY, "--until-done", "--yes")
    assert result.exit_code == 0, result.output
    assert len(waits) == 1
    assert "purged slot app.sync/tenant:1/k1: 121 runs deleted" in result.stdout
    assert get_job(db, job_id) is None


def test_until_done_gives_up_after_its_timeout(db: Database, target: Target) -> None:
    job_id = enroll(db)
    claim(db, queue="default", node="n1")
    result = cli(target, "purge-slot", *IDENTITY, "--until-done", "--timeout", "0", "--yes",
                 "--json")
    assert result.exit_code == 4, result.output
    details: dict[str, Any] = json.loads(result.stdout)["details"]
    assert details["wait_for"] == "lease_release" and details["timed_out"] is True
    assert "lease_release" in result.stderr
    human = cli(target, "purge-slot", *IDENTITY, "--yes")
    assert human.exit_code == 4 and human.stdout == ""
    assert "wait_for=lease_release" in human.stderr and human.stderr.count("\n") == 1
    assert get_job(db, job_id) is not None


def test_purge_refuses_without_yes_and_checks_the_identity(db: Database, target: Target) -> None:
    job_id = enroll(db)
    refused = cli(target, "purge-slot", *IDENTITY)
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert get_job(db, job_id) is not None
    empty = cli(target, "purge-slot", "--namespace", "app.sync", "--scope", " ", "--key", "k1",
                "--yes")
    assert empty.exit_code == 2 and "--scope" in empty.stderr
    absent = cli(target, "purge-slot", "--namespace", "x", "--scope", "y", "--key", "z", "--yes")
    assert absent.exit_code == 0 and "nothing to purge" in absent.stdout
