"""Args are stored and delivered exactly as enqueued, and redacted wherever they are shown,
logged or searched: end to end, through a real `kickside worker` process, the CLI and the
dashboard (issue 18, item 5).

The job's args mix a chat application's ordinary data (``session_id``, ``token_count``,
``auth_provider``: data, not secrets), a built-in secret (``password``) and a name its worker
declares sensitive (``ssn``, via ``@registry.worker(..., sensitive_keys={"ssn"})``). The worker
records what it received, then fails quoting its args, as careless code does.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, Input, Static
from typer.testing import CliRunner

from kickside_engine import Database, JobState, enqueue, get_job
from kickside_engine.control import JobFilter, count_jobs, list_jobs
from kickside_engine.control.search import scan_jobs
from kickside_tui.cli.main import app
from kickside_tui.widgets.job_detail import JobDetailPane

from ..conftest import Target
from ..support.processes import start_worker, stop, wait_for
from ..support.workers import verify_identity
from ..tui.fixtures import make_app, plain, settle, wait_until

runner = CliRunner()
PASSWORD = "not-a-password-7781"
SSN = "078-05-1120"
SECRETS = (PASSWORD, SSN)


def _args(record_to: Path) -> dict[str, Any]:
    return {
        "session_id": 42,
        "token_count": 1200,
        "auth_provider": "google",
        "password": PASSWORD,
        "customer": {"ssn": SSN, "name": "Ada Lovelace"},
        "record_to": str(record_to),
    }


def _no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret} leaked into {where}"


def _ordinary_data_shown(shown: dict[str, Any]) -> None:
    assert shown["session_id"] == 42 and shown["token_count"] == 1200
    assert shown["auth_provider"] == "google" and shown["customer"]["name"] == "Ada Lovelace"
    assert shown["password"] == "[REDACTED]" and shown["customer"]["ssn"] == "[REDACTED]"


async def _dashboard(db: Database, job_id: uuid.UUID) -> tuple[str, int]:
    """The job detail found by searching ``google``, and the rows a search for a secret
    lists."""
    app_ = make_app(db)
    async with app_.run_test(size=(140, 50)) as pilot:
        await pilot.press("2")
        await settle(pilot)
        search = app_.screen.query_one("#f-search", Input)
        search.value = "google"
        search.focus()
        await pilot.press("enter")
        await settle(pilot)
        body = app_.screen.query_one(JobDetailPane).query_one("#detail-body", Static)
        await wait_until(pilot, lambda: str(job_id) in plain(body.content), "the job's detail")
        detail = plain(body.content)
        search.value = PASSWORD
        search.focus()
        await pilot.press("enter")
        await settle(pilot)
        rows = app_.screen.query_one("#jobs", DataTable).row_count
        return detail, rows


@pytest.mark.slow
def test_args_reach_a_real_worker_as_given_and_are_redacted_wherever_shown(
    db: Database, target: Target, tmp_path: Path
) -> None:
    seen_file = tmp_path / "seen.json"
    args = _args(seen_file)
    job_id = enqueue(db, verify_identity.new(args)).id  # type: ignore[attr-defined]
    log = tmp_path / "pool.log"
    pool = start_worker(target.cli_args(), app="tests.support.workers", queues="default:1", log=log)
    try:
        wait_for(
            lambda: (job := get_job(db, job_id)) is not None and job.state is JobState.DISCARDED,
            60,
            "the job to fail for good",
        )
    finally:
        assert stop(pool) == 0

    # Delivered and stored exactly as enqueued: nothing of the chat app's data is rewritten.
    seen = json.loads(seen_file.read_text())
    assert seen["args"] == args
    job = get_job(db, job_id)
    assert job is not None and job.args == args
    assert job.meta["sensitive_keys"] == ["ssn"]  # the worker's declaration, self-describing

    # Errors are stored redacted, the declared name included; the ordinary data stays readable.
    stored_errors = json.dumps([e.error for e in job.errors])
    _no_secret(stored_errors, "the stored errors")
    assert "identity check failed" in stored_errors and "'token_count': 1200" in stored_errors

    # Logged: the pool's log (the kickside.job records at DEBUG level) holds neither secret.
    text = log.read_text()
    assert str(job_id) in text and "identity check failed" in text
    _no_secret(text, "the pool's log")

    # Searched: a secret finds nothing, by any search the CLI and the dashboard use.
    for secret in (*SECRETS, "not-a-password", "05-11"):
        flt = JobFilter(search=secret)
        assert list_jobs(db, flt).jobs == [], secret
        assert scan_jobs(db, flt).jobs == [] and count_jobs(db, flt) == 0, secret
        searched = runner.invoke(app, [*target.cli_args(), "jobs", "--search", secret, "--json"])
        assert searched.exit_code == 0 and json.loads(searched.stdout)["jobs"] == [], secret
    for readable in ("google", "Ada Lovelace", "1200"):
        assert [j.id for j in list_jobs(db, JobFilter(search=readable)).jobs] == [job_id]

    # Shown by the CLI, as tables and as JSON.
    shown = runner.invoke(app, [*target.cli_args(), "job", str(job_id), "--json"])
    assert shown.exit_code == 0, shown.stderr
    document = json.loads(shown.stdout)["job"]
    _ordinary_data_shown(document["args"])
    assert "redacted_args" not in document["meta"]  # the search copy is not shown twice
    for argv in (
        ["job", str(job_id)],
        ["job", str(job_id), "--json"],
        ["jobs", "--json"],
        ["jobs"],
        ["explain", str(job_id)],
        ["explain", str(job_id), "--json"],
    ):
        result = runner.invoke(app, [*target.cli_args(), *argv])
        assert result.exit_code == 0, (argv, result.stderr)
        _no_secret(result.output, f"`kickside {' '.join(argv)}`")

    # Shown by the dashboard: the detail redacts, a search for a secret lists nothing.
    detail, rows = asyncio.run(_dashboard(db, job_id))
    _no_secret(detail, "the dashboard's job detail")
    assert '"token_count": 1200' in detail and '"auth_provider": "google"' in detail
    assert '"password": "[REDACTED]"' in detail and '"ssn": "[REDACTED]"' in detail
    assert rows == 0
