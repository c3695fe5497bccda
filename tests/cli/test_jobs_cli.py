"""`kickside jobs` and `kickside job ID`: filters, paging, detail with redacted history."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, claim, enqueue
from kickside_engine.testing import drain_jobs
from kickside_tui.cli import jobs
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


def listed(target: Target, *args: str) -> set[str]:
    return {j["id"] for j in cli_json(target, "jobs", *args)["jobs"]}


def test_filters_select_by_state_queue_worker_tag_kind_and_search(
    db: Database, target: Target
) -> None:
    a = enqueue(db, JobBuilder("ok", {"order": "A-17"}).queue("mailers").tag("vip")).id
    b = enqueue(db, JobBuilder("ok", {"order": "B-2"}).tag("vip").tag("eu")).id
    c = enqueue(db, JobBuilder("charge", {"customer_id": 1, "amount": 5})).id
    s = enqueue(db, JobBuilder("ok", {}).slot("ns", "sc", "k")).id
    (claimed,) = claim(db, queue="mailers", node="n1")
    assert claimed.job.id == a
    assert listed(target) == {str(x) for x in (a, b, c, s)}
    assert listed(target, "--state", "executing") == {str(a)}
    assert listed(target, "--state", "executing", "--state", "available") == {
        str(x) for x in (a, b, c, s)
    }
    assert listed(target, "--state", "retryable") == set()
    assert listed(target, "--queue", "mailers") == {str(a)}
    assert listed(target, "--worker", "charge") == {str(c)}
    assert listed(target, "--tag", "vip", "--tag", "eu") == {str(b)}
    assert listed(target, "--kind", "slot") == {str(s)}
    assert listed(target, "--search", "a-17") == {str(a)}


def test_paging_prints_the_next_cursor_until_the_last_page(db: Database, target: Target) -> None:
    ids = {str(enqueue(db, JobBuilder("ok", {"n": n})).id) for n in range(5)}
    seen: list[str] = []
    cursor: list[str] = []
    for _ in range(3):
        page = cli_json(target, "jobs", "--limit", "2", *cursor)
        seen += [j["id"] for j in page["jobs"]]
        cursor = ["--cursor", page["next_cursor"]] if page["next_cursor"] else []
    assert sorted(seen) == sorted(ids) and len(seen) == 5 and cursor == []
    human = cli(target, "jobs", "--limit", "2")
    assert human.exit_code == 0 and "next page: --cursor" in human.stdout


def test_human_listing_is_a_table_of_short_ids(db: Database, target: Target) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    result = cli(target, "jobs")
    assert result.exit_code == 0
    assert str(job_id)[-8:] in result.stdout and "available" in result.stdout
    assert str(job_id) not in result.stdout  # the full id is for --wide and --json
    wide = cli(target, "jobs", "--wide")
    assert wide.exit_code == 0 and str(job_id) in wide.stdout


def test_bad_filters_and_cursors_exit_2(db: Database, target: Target) -> None:
    for args in (
        ["--state", "sleeping"],
        ["--kind", "batch"],
        ["--cursor", "nope"],
        ["--limit", "0"],
    ):
        result = cli(target, "jobs", *args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.count("\n") == 1


def test_job_detail_shows_redacted_errors_and_runs(db: Database, target: Target) -> None:
    job_id = enqueue(
        db,
        JobBuilder("leaky", {"api_token": "not-a-token"})
        .meta({"password": "pw-1"})
        .max_attempts(2),
    ).id
    drain_jobs(db, registry, with_scheduled=True)
    doc = cli_json(target, "job", str(job_id))
    job = doc["job"]
    assert job["id"] == str(job_id) and job["state"] == "discarded"
    assert "lease_token" not in job
    assert job["args"] == {"api_token": "[REDACTED]"}
    assert job["meta"]["password"] == "[REDACTED]"
    assert [e["attempt"] for e in job["errors"]] == [1, 2]
    assert [r["attempt"] for r in doc["runs"]] == [1, 2]
    assert all(r["outcome"] == "failed" and r["settled"] for r in doc["runs"])
    assert doc["runs"][0]["started_at"].endswith("Z")
    human = cli(target, "job", str(job_id))
    assert human.exit_code == 0
    for text in (human.stdout, json.dumps(doc)):
        assert "api.example.com" in text
        assert "not-a-password" not in text and "not-a-token" not in text and "pw-1" not in text
    assert "runs" in human.stdout and "errors" in human.stdout


def test_job_exit_codes_for_malformed_and_absent_ids(db: Database, target: Target) -> None:
    malformed = cli(target, "job", "not-a-uuid", "--json")
    assert malformed.exit_code == 2 and "not a UUID" in malformed.stderr
    assert json.loads(malformed.stdout)["error"]["code"] == "invalid_argument"
    absent = cli(target, "job", str(uuid.uuid4()))
    assert absent.exit_code == 3 and "not found" in absent.stderr
    assert absent.stderr.count("\n") == 1 and "Traceback" not in absent.output


def test_an_unreachable_database_exits_5_without_the_password() -> None:
    url = "postgresql+psycopg://deploy:not-a-password@127.0.0.1:1/db"
    result = runner.invoke(app, ["--database-url", url, "jobs"])
    assert result.exit_code == 5, result.output
    assert "not-a-password" not in result.output
    assert result.stderr.count("\n") == 1


def test_an_interrupt_exits_130_and_a_surprise_exits_1_in_one_redacted_line(
    db: Database, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: Any, **__: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(jobs, "list_jobs", interrupted)
    result = cli(target, "jobs")
    assert result.exit_code == 130 and "interrupted" in result.stderr

    def surprised(*_: Any, **__: Any) -> None:
        raise RuntimeError("lost https://deploy:not-a-password@db.example.com/\nsecond line")

    monkeypatch.setattr(jobs, "list_jobs", surprised)
    result = cli(target, "jobs", "--json")
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "failure" and error["message"].startswith("RuntimeError: lost")
    assert "not-a-password" not in result.stdout
    assert result.stderr.count("\n") == 1 and "RuntimeError: lost" in result.stderr
    assert "not-a-password" not in result.stderr and "Traceback" not in result.stderr
