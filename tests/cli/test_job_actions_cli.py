"""Actions on one job: retry, cancel, discard, delete, wake, park, resume; audited, safe."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, JobState, claim, enqueue, get_job
from kickside_engine.control import Actor, list_audit
from kickside_engine.slots import disable_slot, park_job
from kickside_engine.testing import drain_jobs
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support.workers import registry

runner = CliRunner()


def cli(target: Target, *args: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *args])


def cli_json(target: Target, *args: str) -> Any:
    result = cli(target, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def state_of(db: Database, job_id: uuid.UUID) -> JobState | None:
    job = get_job(db, job_id)
    return job.state if job is not None else None


def audited(db: Database, job_id: uuid.UUID) -> list[str]:
    entries = list_audit(db, target=str(job_id)).entries
    me = Actor.current()
    assert all((e.actor, e.host) == (me.user, me.host) for e in entries)
    return [e.action for e in reversed(entries)]


def slot(db: Database, key: str = "k") -> uuid.UUID:
    return enqueue(db, JobBuilder("ok", {}).slot("ns", "sc", key)).id


def test_retry_revives_a_discarded_job_and_is_audited(db: Database, target: Target) -> None:
    job_id = enqueue(db, JobBuilder("discard", {})).id
    drain_jobs(db, registry)
    doc = cli_json(target, "retry", str(job_id))
    assert doc["action"] == "retry" and doc["job"]["state"] == "available"
    assert state_of(db, job_id) is JobState.AVAILABLE
    assert audited(db, job_id) == ["retry"]
    again = cli(target, "retry", str(job_id), "--json")
    assert again.exit_code == 4 and "it is available" in again.stderr
    assert json.loads(again.stdout)["error"]["details"]["state"] == "available"


@pytest.mark.parametrize(("verb", "final"), [("cancel", "cancelled"), ("discard", "discarded")])
def test_destructive_actions_refuse_without_yes_then_act(
    db: Database, target: Target, verb: str, final: str
) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    refused = cli(target, verb, str(job_id))
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert state_of(db, job_id) is JobState.AVAILABLE and audited(db, job_id) == []
    done = cli(target, verb, str(job_id), "--yes")
    assert done.exit_code == 0, done.output
    assert f"now {final}" in done.stdout
    assert state_of(db, job_id) is JobState(final) and audited(db, job_id) == [verb]
    conflict = cli(target, verb, str(job_id), "--yes", "--json")
    assert conflict.exit_code == 4
    assert json.loads(conflict.stdout)["error"]["details"] == {
        "state": final,
        "action": verb,
        "job_id": str(job_id),
    }


def test_cancelling_an_executing_job_takes_its_lease(db: Database, target: Target) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    claim(db, queue="default", node="n1")
    doc = cli_json(target, "cancel", str(job_id), "--yes")
    assert doc["job"]["state"] == "cancelled" and doc["job"]["lease_owner"] == "n1"


def test_delete_removes_a_job_but_not_an_executing_one(db: Database, target: Target) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    assert cli(target, "delete", str(job_id)).exit_code == 2
    claim(db, queue="default", node="n1")
    busy = cli(target, "delete", str(job_id), "--yes")
    assert busy.exit_code == 4 and "executing" in busy.stderr
    cli_json(target, "cancel", str(job_id), "--yes")
    doc = cli_json(target, "delete", str(job_id), "--yes")
    assert doc["action"] == "delete" and get_job(db, job_id) is None
    assert audited(db, job_id) == ["cancel", "delete"]


def test_malformed_ids_exit_2_and_absent_ones_exit_3(db: Database, target: Target) -> None:
    for verb in ("retry", "cancel", "discard", "delete", "wake", "park", "resume", "explain"):
        yes = ["--yes"] if verb in ("cancel", "discard", "delete", "park") else []
        malformed = cli(target, verb, "12345", *yes)
        assert malformed.exit_code == 2, (verb, malformed.output)
        assert malformed.stderr.count("\n") == 1 and "12345" in malformed.stderr
        absent = cli(target, verb, str(uuid.uuid4()), *yes)
        assert absent.exit_code == 3, (verb, absent.output)


def test_wake_makes_a_parked_slot_due_and_records_the_wake(db: Database, target: Target) -> None:
    job_id = slot(db)
    park_job(db, job_id)
    doc = cli_json(target, "wake", str(job_id))
    assert doc["woke"] is True and doc["state"] == "available" and doc["control"] is True
    job = get_job(db, job_id)
    assert job is not None and job.control_pending and not job.demand_pending
    already = cli_json(target, "wake", str(job_id), "--ensure-due")
    assert already["already_due"] is True and already["woke"] is False
    cli_json(target, "wake", str(job_id), "--ordinary")
    job = get_job(db, job_id)
    assert job is not None and job.demand_pending and job.demand_seq == 1
    assert audited(db, job_id) == ["wake", "wake", "wake"]
    human = cli(target, "wake", str(job_id), "--ensure-due")
    assert human.exit_code == 0 and "already due" in human.stdout


def test_a_finished_job_cannot_be_woken(db: Database, target: Target) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    drain_jobs(db, registry)
    result = cli(target, "wake", str(job_id), "--json")
    assert result.exit_code == 4
    assert json.loads(result.stdout)["error"]["details"] == {"state": "completed"}


def test_park_asks_first_rests_a_slot_and_refuses_a_one_shot_job(
    db: Database, target: Target
) -> None:
    job_id = slot(db)
    refused = cli(target, "park", str(job_id))  # no terminal, no --yes: as the dashboard asks
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    assert state_of(db, job_id) is not JobState.PARKED and audited(db, job_id) == []
    doc = cli_json(target, "park", str(job_id), "--yes")
    assert doc["job"]["state"] == "parked" and audited(db, job_id) == ["park"]
    again = cli_json(target, "park", str(job_id))  # parked already: nothing to confirm
    assert again["job"]["state"] == "parked"
    oneshot = enqueue(db, JobBuilder("ok", {})).id
    assert cli(target, "park", str(oneshot)).exit_code == 4


def test_resume_enables_wakes_or_retries(db: Database, target: Target) -> None:
    disabled = slot(db, "d")
    disable_slot(db, disabled)
    assert cli_json(target, "resume", str(disabled))["job"]["state"] == "parked"
    assert audited(db, disabled) == ["resume"]  # under the command's name
    parked = slot(db, "p")
    park_job(db, parked)
    assert cli_json(target, "resume", str(parked))["job"]["state"] == "available"
    assert audited(db, parked) == ["resume"]
    failing = enqueue(db, JobBuilder("fail", {}).queue("f")).id
    drain_jobs(db, registry, queue="f")
    assert state_of(db, failing) is JobState.RETRYABLE
    assert cli_json(target, "resume", str(failing))["job"]["state"] == "available"
    assert audited(db, failing) == ["resume"]
    # What resume did is in the row: audit --action resume finds all three.
    entries = list_audit(db, action="resume").entries
    assert [e.details["via"] for e in entries] == ["retry", "wake", "enable"]
    assert [e.details["to"] for e in entries] == ["available", "available", "parked"]
