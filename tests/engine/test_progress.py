"""Progress: ``job.report_progress`` checks its value, the testing helpers run it, the last
report is stored with the outcome, a claim clears it, and it is shown redacted."""

from __future__ import annotations

import json
import re
import threading
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import (
    MAX_PROGRESS_BYTES,
    Database,
    InvalidArgumentError,
    JobBuilder,
    JobState,
    NotRunningError,
    ProgressNotStorableError,
    claim,
    enqueue,
    get_job,
    migrate,
)
from kickside_engine.clock import utcnow
from kickside_engine.plugins.stager import stage
from kickside_engine.progress import ProgressReporter, storable_progress
from kickside_engine.store.progress import write_progress
from kickside_engine.testing import drain_jobs, perform_job
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support import progress_app


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (1.5, "progress fraction must be between 0 and 1, got 1.5"),
        (-0.1, "progress fraction must be between 0 and 1, got -0.1"),
        (float("nan"), "progress fraction must be between 0 and 1, got nan"),
        (True, "progress must be a fraction between 0 and 1 or a dict, not bool"),
        ("50%", "progress must be a fraction between 0 and 1 or a dict, not str"),
        ([0.5], "progress must be a fraction between 0 and 1 or a dict, not list"),
        ({1: "a"}, "progress dict keys must be strings"),
        ({"seen": {1, 2}}, "progress cannot be stored as JSON: Object of type set"),
        ({"rate": float("inf")}, "progress cannot be stored as JSON: Out of range float"),
        ({"x": "a\x00b"}, "progress cannot be stored as JSON: its values contain a NUL"),
        (
            {"log": "x" * MAX_PROGRESS_BYTES},
            f"progress is 4107 bytes of JSON, over the {MAX_PROGRESS_BYTES}",
        ),
    ],
)
def test_bad_progress_is_refused_naming_what_is_wrong(value: object, message: str) -> None:
    with pytest.raises(ProgressNotStorableError, match="^" + re.escape(message)):
        storable_progress(value)
    assert issubclass(ProgressNotStorableError, InvalidArgumentError)


def test_good_progress_is_stored_in_its_json_form() -> None:
    assert storable_progress(0) == 0.0 and isinstance(storable_progress(1), float)
    assert storable_progress({"done": (1, 2), "of": 3}) == {"done": [1, 2], "of": 3}


def test_reporting_outside_a_run_names_the_job_and_checks_the_value_first(
    db: Database,
) -> None:
    job = get_job(db, enqueue(db, JobBuilder("flood", {"count": 1})).id)
    assert job is not None
    with pytest.raises(NotRunningError, match=f"job {job.id} is not running here"):
        job.report_progress(0.5)
    with pytest.raises(ProgressNotStorableError, match="between 0 and 1, got 2"):
        job.report_progress(2)


def test_perform_job_collects_every_report_and_refuses_a_bad_one() -> None:
    seen: list[object] = []
    perform_job(progress_app.flood, {"count": 4}, progress=seen)
    assert seen == [0.25, 0.5, 0.75, 1.0]
    perform_job(progress_app.flood, {"count": 2})  # without a list: checked, not kept
    with pytest.raises(ProgressNotStorableError, match="not str"):
        perform_job(progress_app.bad_progress, {"value": "half"})


def test_perform_job_runs_an_async_workers_reports(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.write_text("99")
    seen: list[object] = []
    perform_job(progress_app.async_stepped, {"steps": 1, "gate": str(gate)}, progress=seen)
    assert seen == [0.5]


def test_a_reporter_sends_at_most_once_per_interval_and_keeps_the_last_for_the_outcome() -> None:
    sent: list[object] = []
    reporter = ProgressReporter(sent.append, interval_seconds=3600)
    for i in range(1, 100_001):
        reporter.report(i / 100_000)
    assert sent == [0.00001]  # the first goes at once; the rest wait for the interval
    assert reporter.unsent() == 1.0  # ... and the last goes with the outcome
    assert reporter.unsent() is None
    reporter.report(0.5)  # after the end: checked, never sent
    assert sent == [0.00001]


def test_a_value_reported_within_the_interval_is_sent_when_it_passes() -> None:
    arrived = threading.Event()
    sent: list[object] = []

    def send(value: object) -> None:
        sent.append(value)
        if len(sent) == 2:
            arrived.set()

    reporter = ProgressReporter(send, interval_seconds=0.05)
    reporter.report(0.1)
    reporter.report(0.2)
    reporter.report(0.3)  # replaces 0.2 while it waits
    assert arrived.wait(10)
    assert sent == [0.1, 0.3]
    assert reporter.unsent() is None


def test_drain_stores_the_last_report_and_the_cli_shows_it_redacted(
    db: Database, target: Target, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    gate.write_text("99")  # open: the stepped job does not wait
    flood = enqueue(db, JobBuilder("flood", {"count": 1000})).id
    secret = enqueue(
        db, JobBuilder("stepped", {"steps": 1, "gate": str(gate), "token": "s3cret-value"})
    ).id
    drain_jobs(db, progress_app.registry, queue="default", with_recursion=False)
    assert get_job(db, flood).progress == 1.0  # type: ignore[union-attr]
    stored = get_job(db, secret).progress  # type: ignore[union-attr]
    assert stored == {"step": 0, "of": 1, "token": "s3cret-value"}  # stored as given
    runner = CliRunner()
    shown = runner.invoke(app, [*target.cli_args(), "job", str(secret), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["job"]["progress"] == {
        "step": 0,
        "of": 1,
        "token": "[REDACTED]",
    }
    human = runner.invoke(app, [*target.cli_args(), "job", str(flood)])
    assert human.exit_code == 0, human.output
    assert "progress" in human.stdout and "100%" in human.stdout
    human = runner.invoke(app, [*target.cli_args(), "job", str(secret)])
    assert "s3cret-value" not in human.stdout and "[REDACTED]" in human.stdout


def test_a_new_attempt_starts_without_the_previous_attempts_progress(db: Database) -> None:
    job_id = enqueue(db, JobBuilder("half_then_fail", {})).id
    drain_jobs(db, progress_app.registry, with_recursion=False)
    failed = get_job(db, job_id)
    assert failed is not None and failed.state is JobState.RETRYABLE
    assert failed.progress == 0.5  # the ended attempt's last report stays for operators
    later = utcnow() + timedelta(hours=1)
    stage(db, later)
    (claimed,) = claim(db, queue="default", node="n1", now=later)
    assert claimed.job.progress is None
    assert get_job(db, job_id).progress is None  # type: ignore[union-attr]


def test_progress_writes_are_fenced_by_the_lease(db: Database) -> None:
    job_id = enqueue(db, JobBuilder("flood", {"count": 1})).id
    (claimed,) = claim(db, queue="default", node="n1")
    write_progress(db, node="n2", progress={claimed.lease_token: 0.9})  # not its node
    write_progress(db, node="n1", progress={uuid.uuid4(): 0.8})  # not its lease
    assert get_job(db, job_id).progress is None  # type: ignore[union-attr]
    write_progress(db, node="n1", progress={claimed.lease_token: {"rows": 7}})
    assert get_job(db, job_id).progress == {"rows": 7}  # type: ignore[union-attr]


def test_migration_0008_adds_and_drops_the_progress_column(db: Database) -> None:
    def columns() -> set[str]:
        with db.read(check_schema=False) as conn:
            inspector = sa.inspect(conn)
            return {c["name"] for c in inspector.get_columns("kickside_job", schema=db.schema)}

    assert "progress" in columns()
    migrate.downgrade(db, "0007")
    assert "progress" not in columns() and "result" in columns()
    assert migrate.upgrade(db).up_to_date
    assert "progress" in columns()


def test_a_slot_keeps_its_last_runs_progress_until_its_next_run_starts(db: Database) -> None:
    builder = JobBuilder("flood", {"count": 4}).slot("app.sync", "t:1", "k", demand=True)
    job_id = enqueue(db, builder).id
    drain_jobs(db, progress_app.registry)
    slot = get_job(db, job_id)
    assert slot is not None and slot.state is JobState.PARKED and slot.progress == 1.0
    enqueue(db, builder)  # demand again: the parked slot is due
    (claimed,) = claim(db, queue="default", node="n1")
    assert claimed.job.id == job_id and claimed.job.progress is None
