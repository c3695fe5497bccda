"""`kickside purge-slot`: one call by default; --until-done follows the continuation contract;
the request clears the slot's wakes, shows in slots/job/explain until done, and each command
leaves one audit row with its outcome."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, RunOutcome, claim, complete, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import list_audit, list_runs
from kickside_engine.purge import purge_request
from kickside_engine.slots import wake_job, wake_multi
from kickside_tui.cli import purge
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support.processes import ROOT, wait_for

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
                    "job_id": job_id,
                    "attempt": 1,
                    "queue": "default",
                    "worker": "ok",
                    "node": "n1",
                    "lease_token": uuid.uuid4(),
                    "started_at": start + timedelta(seconds=i),
                    "finished_at": start + timedelta(seconds=i, milliseconds=5),
                    "duration_ms": 5,
                    "outcome": RunOutcome.COMPLETED.value,
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
    details = json.loads(result.stdout)["error"]["details"]
    assert details["needs_continue"] is True and details["runs_deleted"] == 100
    assert "more remain" in result.stderr and result.stderr.count("\n") == 1
    done = cli(target, "purge-slot", *IDENTITY, "--yes", "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {  # the second call deleted the last 50 runs
        "namespace": "app.sync",
        "scope": "tenant:1",
        "key": "k1",
        "removed": 1,
        "runs_deleted": 50,
        "calls": 1,
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
    (entry,) = list_audit(db, action="purge_slot").entries  # one for the command
    assert entry.target == "app.sync/tenant:1/k1"
    assert entry.details == {
        "outcome": "removed",
        "removed": 1,
        "runs_deleted": 263,
        "calls": 3,
        "until_done": True,
    }


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
    result = cli(
        target, "purge-slot", *IDENTITY, "--until-done", "--timeout", "0", "--yes", "--json"
    )
    assert result.exit_code == 4, result.output
    details: dict[str, Any] = json.loads(result.stdout)["error"]["details"]
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
    empty = cli(
        target, "purge-slot", "--namespace", "app.sync", "--scope", " ", "--key", "k1", "--yes"
    )
    assert empty.exit_code == 2 and "--scope" in empty.stderr
    absent = cli(target, "purge-slot", "--namespace", "x", "--scope", "y", "--key", "z", "--yes")
    assert absent.exit_code == 0 and "nothing to purge" in absent.stdout


# --- issue 19.6: the request clears wakes, shows until done, one audit row per command --------


def running_with_wakes(db: Database) -> tuple[uuid.UUID, Any]:
    """The slot executing, with a control wake and ordinary demand recorded meanwhile."""
    job_id = enqueue(db, JobBuilder("ok", {}).slot("app.sync", "tenant:1", "k1", demand=True)).id
    (claimed,) = claim(db, queue="default", node="n1")
    wake_job(db, job_id)
    with db.begin() as conn:
        wake_multi(db, [("app.sync", "tenant:1", "k1")], conn=conn)
    slot = get_job(db, job_id)
    assert slot is not None and slot.control_pending and slot.demand_pending
    return job_id, claimed


def test_a_purge_of_a_running_slot_with_wakes_shows_as_pending_and_it_never_runs_again(
    db: Database, target: Target
) -> None:
    job_id, claimed = running_with_wakes(db)
    first = cli(target, "purge-slot", *IDENTITY, "--yes", "--json")
    assert first.exit_code == 4 and json.loads(first.stdout)["error"]["details"]["wait_for"] == (
        "lease_release"
    )
    slots = cli(target, "slots")
    assert slots.exit_code == 0 and "executing, purging" in slots.stdout
    assert "purge pending since" in slots.stderr and "by " in slots.stderr
    slots_doc = json.loads(cli(target, "slots", "--json").stdout)["slots"][0]
    assert slots_doc["purge"]["requested_by"] and slots_doc["purge"]["requested_at"]
    assert not slots_doc["demand_pending"] and not slots_doc["control_pending"]
    job = cli(target, "job", str(job_id))
    assert "purge pending since" in job.stdout and "runs no more" in job.stdout
    assert json.loads(cli(target, "job", str(job_id), "--json").stdout)["purge"] is not None
    explained = cli(target, "explain", str(job_id))
    assert "purge_pending" in explained.stdout and "--until-done" in explained.stdout
    refused = cli(target, "wake", str(job_id))
    assert refused.exit_code == 4 and "being purged" in refused.stderr
    # The run ends: the wakes recorded before the purge no longer make it run again.
    assert complete(db, claimed)
    slot = get_job(db, job_id)
    assert slot is not None and slot.state.value == "parked"
    assert claim(db, queue="default", node="n2") == []
    assert cli(target, "purge-slot", *IDENTITY, "--yes").exit_code == 0
    assert get_job(db, job_id) is None
    entries = list_audit(db, action="purge_slot").entries  # one per command
    assert [e.details["outcome"] for e in entries] == ["removed", "pending"]


def test_until_done_interrupted_leaves_one_audit_row_and_the_purge_pending(
    db: Database, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id, _ = running_with_wakes(db)
    polls: list[float] = []

    def ctrl_c_on_the_third_poll(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(purge, "wait", ctrl_c_on_the_third_poll)
    result = cli(target, "purge-slot", *IDENTITY, "--until-done", "--yes")
    assert result.exit_code == 130, result.output
    assert "still pending" in result.stderr and "--withdraw" in result.stderr
    (entry,) = list_audit(db, action="purge_slot").entries  # not one per poll
    assert entry.details["outcome"] == "interrupted" and entry.details["calls"] == 3
    assert entry.details["wait_for"] == "lease_release"
    assert "executing, purging" in cli(target, "slots").stdout
    withdrawn = cli(target, "purge-slot", *IDENTITY, "--withdraw", "--json")
    assert withdrawn.exit_code == 0 and json.loads(withdrawn.stdout)["withdrawn"] is True
    assert "purging" not in cli(target, "slots").stdout
    assert cli(target, "wake", str(job_id)).exit_code == 0


def test_until_done_timing_out_is_audited_once_with_its_outcome(
    db: Database, target: Target
) -> None:
    running_with_wakes(db)
    result = cli(target, "purge-slot", *IDENTITY, "--until-done", "--timeout", "0", "--yes")
    assert result.exit_code == 4 and "the purge stays pending" in result.stderr
    (entry,) = list_audit(db, action="purge_slot").entries
    assert entry.details["outcome"] == "timed_out" and entry.details["timed_out"] is True


def test_ctrl_c_on_a_real_until_done_process_exits_130_with_one_audit_row(
    db: Database, target: Target
) -> None:
    job_id, _ = running_with_wakes(db)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kickside_tui.cli",
            *target.cli_args(),
            "purge-slot",
            *IDENTITY,
            "--until-done",
            "--yes",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(
            lambda: (s := get_job(db, job_id)) is not None and purge_request(s.meta),
            what="the purge request",
        )
        time.sleep(0.3)  # a few polls: each would have been an audit row before
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert b"still pending" in err
    (entry,) = list_audit(db, action="purge_slot").entries
    assert entry.details["outcome"] == "interrupted" and entry.details["calls"] >= 1
    assert "executing, purging" in cli(target, "slots").stdout
