"""`kickside enqueue`: one-shot jobs, slots, uniqueness and every usage error as exit 2."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobKind, JobState, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, list_audit
from kickside_tui.cli.main import app

from ..conftest import Target

runner = CliRunner()


def cli(target: Target, *args: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *args])


def enqueued(target: Target, *args: str) -> dict[str, Any]:
    result = cli(target, "enqueue", *args, "--json")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_enqueue_writes_every_option_and_prints_one_json_document(
    db: Database, target: Target
) -> None:
    doc = enqueued(
        target,
        "ok",
        "--args",
        '{"n": 1, "password": "hunter2", "ssn": "078-05-1120"}',
        "--queue",
        "mailers",
        "--priority",
        "3",
        "--max-attempts",
        "4",
        "--tag",
        "a",
        "--tag",
        "b",
        "--meta",
        '{"origin": "runbook"}',
        "--concurrency-key",
        "tenant:1",
        "--max-execution",
        "30",
        "--schedule-in",
        "600",
        "--sensitive-key",
        "ssn",
    )
    assert doc["duplicate"] is False and doc["state"] == "scheduled"
    job = get_job(db, doc["id"])
    assert job is not None
    # Stored as given; shown redacted, the declared name included.
    assert job.args == {"n": 1, "password": "hunter2", "ssn": "078-05-1120"}
    assert job.meta["sensitive_keys"] == ["ssn"]
    shown = cli(target, "job", doc["id"], "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["job"]["args"] == {
        "n": 1,
        "password": "[REDACTED]",
        "ssn": "[REDACTED]",
    }
    assert "hunter2" not in shown.stdout and "078-05-1120" not in shown.stdout
    assert (job.queue, job.priority, job.max_attempts) == ("mailers", 3, 4)
    assert job.tags == ["a", "b"] and job.meta["origin"] == "runbook"
    assert job.concurrency_key == "tenant:1" and job.max_execution_ms == 30_000
    assert job.scheduled_at > utcnow() + timedelta(seconds=500)
    (entry,) = list_audit(db, target=doc["id"]).entries
    assert entry.action == "enqueue" and (entry.actor, entry.host) == (
        Actor.current().user,
        Actor.current().host,
    )
    assert entry.details["queue"] == "mailers" and entry.details["duplicate"] is False


def test_human_output_names_the_job(db: Database, target: Target) -> None:
    result = cli(target, "enqueue", "ok")
    assert result.exit_code == 0, result.output
    assert "enqueued job" in result.stdout and "(available)" in result.stdout


def test_schedule_at_takes_an_aware_iso_time(db: Database, target: Target) -> None:
    when = (utcnow() + timedelta(hours=1)).replace(microsecond=0)
    doc = enqueued(target, "ok", "--schedule-at", when.isoformat().replace("+00:00", "Z"))
    job = get_job(db, doc["id"])
    assert job is not None and job.state is JobState.SCHEDULED and job.scheduled_at == when


def test_a_unique_job_is_found_instead_of_inserted_twice(db: Database, target: Target) -> None:
    first = enqueued(target, "ok", "--args", '{"a": 1, "b": 1}', "--unique", "keys:a")
    second = enqueued(target, "ok", "--args", '{"a": 1, "b": 2}', "--unique", "keys:a")
    assert second == {**first, "duplicate": True}
    other = enqueued(
        target, "ok", "--args", '{"a": 1}', "--unique", "worker", "--unique-period", "60"
    )
    assert other["duplicate"] is False


def test_identity_options_enroll_a_slot_with_demand(db: Database, target: Target) -> None:
    doc = enqueued(
        target, "ok", "--namespace", "app.sync", "--scope", "t:1", "--key", "k", "--demand"
    )
    job = get_job(db, doc["id"])
    assert job is not None and job.kind is JobKind.SLOT and job.control_pending
    assert (job.namespace, job.scope, job.identity_key) == ("app.sync", "t:1", "k")
    again = enqueued(
        target, "ok", "--slot", "--namespace", "app.sync", "--scope", "t:1", "--key", "k"
    )
    assert again["id"] == doc["id"] and again["duplicate"] is True


def test_worker_defaults_come_from_the_app_registry(db: Database, target: Target) -> None:
    doc = enqueued(target, "fail", "--app", "tests.support.workers")
    job = get_job(db, doc["id"])
    assert job is not None and job.max_attempts == 3  # the worker's declared default
    result = cli(target, "enqueue", "nope", "--app", "tests.support.workers")
    assert result.exit_code == 2 and "not registered" in result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--args", "{not json"], "--args is not valid JSON"),
        (["--args", "[1, 2]"], "--args must be a JSON object"),
        (["--meta", "7"], "--meta must be a JSON object"),
        (["--priority", "10"], "--priority must be 0..9"),
        (["--priority", "-1"], "--priority must be 0..9"),
        (["--max-attempts", "0"], "max_attempts"),
        (["--schedule-at", "2030-01-01T00:00:00"], "timezone"),
        (["--schedule-at", "soon"], "ISO-8601"),
        (["--schedule-in", "1", "--schedule-at", "2030-01-01T00:00:00Z"], "not both"),
        (["--unique", "everything"], "--unique must be"),
        (["--unique-period", "60"], "--unique-period needs --unique"),
        (["--namespace", "ns", "--scope", "", "--key", "k"], "scope"),
        (["--slot"], "namespace"),
        (["--demand"], "--demand applies to slot jobs"),
        (["--queue", "has space"], "invalid queue"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    db: Database, target: Target, args: list[str], needle: str
) -> None:
    result = cli(target, "enqueue", "ok", *args, "--json")
    assert result.exit_code == 2, result.output
    assert needle in result.stderr and result.stderr.count("\n") == 1
    error = json.loads(result.stdout)["error"]  # the one error document, on stdout
    assert error["code"] == "invalid_argument" and error["exit_code"] == 2
    assert needle in error["message"]


def test_an_unmigrated_database_is_a_one_line_failure(target: Target) -> None:
    result = cli(target, "enqueue", "ok")
    assert result.exit_code == 1
    assert "kickside migrate" in result.stderr and "Traceback" not in result.output
