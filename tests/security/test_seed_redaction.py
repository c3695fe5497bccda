"""The seed's redaction example and the other secret shapes, end to end, through a real
`kickside worker` process.

A worker fails with ``https://deploy:not-a-password@api.example.com/v1/charges?token=not-a-token``
(the seed's example), a bearer token, ``password=``/``secret=``/``api_key=`` pairs or a
PostgreSQL URL with a password (:data:`tests.support.workers.LEAKS`), and the job's args carry
the same text. Errors are stored redacted: no secret may appear in the stored errors, the run
rows or the args' redacted copy that search reads. Args are stored as given (the worker gets
them whole), and redacted everywhere else: no secret may appear in search results (searching
for a secret finds nothing), in the pool's log, in the CLI's output (``kickside job``,
``--json``, ``jobs``, ``explain``) or in the dashboard's job detail; the host, path and cause
stay readable everywhere.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from textual.widgets import Input, Static
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.control import JobFilter, list_jobs
from kickside_engine.redact import REDACTED
from kickside_tui.cli.main import app
from kickside_tui.widgets.job_detail import JobDetailPane

from ..conftest import Target
from ..support.processes import start_worker, stop, wait_for
from ..support.workers import LEAKS
from ..tui.fixtures import make_app, plain, settle, wait_until

SEED_URL = "https://deploy:not-a-password@api.example.com/v1/charges?token=not-a-token"
runner = CliRunner()


@dataclass(frozen=True)
class Leak:
    """One secret shape: the worker's failure (``LEAKS[name]``), its secrets, its context."""

    name: str
    secrets: tuple[str, ...]
    #: Host and path: readable everywhere, and what a search finds the job by.
    context: str

    @property
    def text(self) -> str:
        return LEAKS[self.name]

    @property
    def readable(self) -> tuple[str, ...]:
        return (self.context, "charge failed")


CASES = [
    Leak("seed_url", ("not-a-password", "not-a-token"), "api.example.com/v1/charges"),
    Leak("bearer_token", ("not-a-bearer-token",), "api.example.com/v1/charges"),
    Leak(
        "key_value_pairs",
        ("not-a-password", "not-a-secret", "not-an-api-key"),
        "api.example.com/v1/charges",
    ),
    Leak("postgresql_url", ("not-a-db-password",), "db.internal:5432/charges"),
]


def assert_redacted(text: str, where: str, leak: Leak, readable: tuple[str, ...]) -> None:
    for secret in leak.secrets:
        assert secret not in text, f"{secret} leaked into {where}"
    for part in readable:
        assert part in text, f"{part!r} is no longer readable in {where}"


def raw_rows(db: Database, job_id: uuid.UUID) -> str:
    """Every column of the job's row but its args (stored as given), with its runs, as stored,
    as one text."""
    job, run = db.tables.job, db.tables.job_run
    with db.read() as conn:
        rows = [*conn.execute(select(job).where(job.c.id == job_id)).mappings()]
        rows += [*conn.execute(select(run).where(run.c.job_id == job_id)).mappings()]
    assert len(rows) == 2, "one job row and one run row"
    rows[0] = {k: v for k, v in rows[0].items() if k != "args"}
    return json.dumps([dict(r) for r in rows], default=str, ensure_ascii=False)


async def _dashboard_detail(db: Database, job_id: uuid.UUID, search: str) -> str:
    app_ = make_app(db)
    async with app_.run_test(size=(140, 50)) as pilot:
        await pilot.press("2")
        await settle(pilot)
        app_.screen.query_one("#f-search", Input).value = search
        app_.screen.query_one("#f-search", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        body = app_.screen.query_one(JobDetailPane).query_one("#detail-body", Static)
        await wait_until(pilot, lambda: str(job_id) in plain(body.content), "the job's detail")
        return plain(body.content)


@pytest.mark.slow
@pytest.mark.parametrize("leak", CASES, ids=[c.name for c in CASES])
def test_the_seed_example_leaks_its_secrets_nowhere(
    db: Database, target: Target, tmp_path: Path, leak: Leak
) -> None:
    assert all(secret in leak.text for secret in leak.secrets)
    args = {"leak": leak.name, "endpoint": leak.text, "order": 42}
    job_id = enqueue(db, JobBuilder("leaky", args).max_attempts(1)).id
    log = tmp_path / "pool.log"
    pool = start_worker(target.cli_args(), app="tests.support.workers", queues="default:1", log=log)
    try:
        wait_for(
            lambda: (job := get_job(db, job_id)) is not None and job.state is JobState.DISCARDED,
            60,
            "the leaky job to fail for good",
        )
    finally:
        assert stop(pool) == 0

    # Stored: the args as given; no other column of the job's row (its errors, the args'
    # redacted copy in meta) nor its run holds a secret; host, path and cause stay.
    job = get_job(db, job_id)
    assert job is not None and job.args == args
    assert_redacted(raw_rows(db, job_id), "the raw database rows", leak, leak.readable)
    shown = job.meta["redacted_args"]
    assert REDACTED in shown["endpoint"] and REDACTED in job.errors[-1].error
    assert f"RuntimeError: {shown['endpoint']}" in job.errors[-1].error
    if leak.name == "seed_url":
        assert shown["endpoint"] == (
            "charge failed for https://deploy:[REDACTED]@api.example.com/v1/charges"
            "?token=[REDACTED]"
        )

    # Searched: a secret finds nothing, what stays readable finds the job.
    for secret in leak.secrets:
        assert list_jobs(db, JobFilter(search=secret)).jobs == [], secret
    found = list_jobs(db, JobFilter(search=leak.context)).jobs
    assert [j.id for j in found] == [job_id]

    # Logged: the pool's log line for the failure keeps the cause, not the secrets.
    text = log.read_text()
    assert str(job_id) in text
    assert_redacted(text, "the pool's log", leak, (leak.context,))

    # Shown by the CLI, as tables and as JSON.
    for argv in (
        ["job", str(job_id)],
        ["job", str(job_id), "--json"],
        ["jobs", "--json"],
        ["jobs", "--state", "discarded"],
        ["explain", str(job_id), "--json"],
    ):
        result = runner.invoke(app, [*target.cli_args(), *argv])
        assert result.exit_code == 0, (argv, result.stderr)
        # `jobs` cuts the last error to a table cell; `explain` shows reasons, not errors.
        readable = {"job": leak.readable, "jobs": ("charge failed",), "explain": ()}[argv[0]]
        assert_redacted(result.output, f"`kickside {' '.join(argv)}`", leak, readable)
    for secret in leak.secrets:
        searched = runner.invoke(app, [*target.cli_args(), "jobs", "--search", secret, "--json"])
        assert json.loads(searched.stdout)["jobs"] == [], secret

    # Shown by the dashboard's job detail.
    detail: Any = asyncio.run(_dashboard_detail(db, job_id, leak.context))
    host = leak.context.split("/")[0].split(":")[0]
    assert_redacted(detail, "the dashboard's job detail", leak, (host, "charge failed"))
