"""`kickside bulk retry|cancel|discard`: dry run, refusal, batches, and the audit trail."""

from __future__ import annotations

import json
import uuid
from typing import Any

from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.control import list_audit
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


def test_dry_run_counts_and_samples_without_changing_anything(
    db: Database, target: Target
) -> None:
    ids = [enqueue(db, JobBuilder("ok", {"n": n}).queue("bulk")).id for n in range(5)]
    enqueue(db, JobBuilder("ok", {}).queue("other"))
    doc = cli_json(target, "bulk", "cancel", "--queue", "bulk", "--dry-run", "--sample", "2")
    assert doc["count"] == 5 and doc["dry_run"] is True and doc["filter"] == {"queues": ["bulk"]}
    assert [j["id"] for j in doc["sample"]] == [str(i) for i in reversed(ids[-2:])]
    assert {state_of(db, i) for i in ids} == {JobState.AVAILABLE}
    human = cli(target, "bulk", "cancel", "--queue", "bulk", "--dry-run")
    assert human.exit_code == 0 and "would change 5 jobs" in human.stdout


def test_bulk_refuses_without_yes_then_acts_in_batches(db: Database, target: Target) -> None:
    ids = [enqueue(db, JobBuilder("ok", {}).tag("batch")).id for _ in range(5)]
    refused = cli(target, "bulk", "discard", "--tag", "batch")
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    doc = cli_json(target, "bulk", "discard", "--tag", "batch", "--batch", "2", "--yes")
    assert (doc["matched"], doc["changed"], doc["skipped"]) == (5, 5, 0)
    assert {state_of(db, i) for i in ids} == {JobState.DISCARDED}
    batches = list_audit(db, action="bulk_discard").entries
    assert len(batches) == 3 and sorted(len(e.details["ids"]) for e in batches) == [1, 2, 2]


def test_bulk_retry_revives_discarded_jobs_by_worker(db: Database, target: Target) -> None:
    failed = enqueue(db, JobBuilder("discard", {})).id
    drain_jobs(db, registry)
    doc = cli_json(target, "bulk", "retry", "--worker", "discard", "--state", "discarded",
                   "--yes")
    assert doc["changed"] == 1 and state_of(db, failed) is JobState.AVAILABLE
    nothing = cli(target, "bulk", "retry", "--worker", "discard", "--state", "discarded")
    assert nothing.exit_code == 0 and "0 jobs changed" in nothing.stdout  # no prompt: no work


def test_an_empty_filter_needs_all(db: Database, target: Target) -> None:
    enqueue(db, JobBuilder("ok", {}))
    refused = cli(target, "bulk", "cancel", "--yes")
    assert refused.exit_code == 2 and "--all" in refused.stderr
    assert cli_json(target, "bulk", "cancel", "--all", "--yes")["changed"] == 1
    assert cli(target, "bulk", "cancel", "--state", "sleeping").exit_code == 2
    assert cli(target, "bulk", "cancel", "--all", "--batch", "0", "--yes").exit_code == 2
