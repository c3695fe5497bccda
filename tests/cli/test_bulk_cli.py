"""`kickside bulk retry|cancel|discard`: dry run, refusals, batches, the audit trail, and the
safety rules of issue 19 (completed jobs, --all, the previewed set, typed counts)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, BulkPreview, JobFilter, cancel_job, list_audit
from kickside_engine.testing import drain_jobs
from kickside_tui.cli import bulk, confirm
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


def test_dry_run_counts_and_samples_without_changing_anything(db: Database, target: Target) -> None:
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
    assert (doc["matched"], doc["changed"], doc["moved_on"]) == (5, 5, 0)
    assert {state_of(db, i) for i in ids} == {JobState.DISCARDED}
    batches = list_audit(db, action="bulk_discard").entries
    assert len(batches) == 3 and sorted(len(e.details["ids"]) for e in batches) == [1, 2, 2]


def test_bulk_retry_revives_discarded_jobs_by_worker(db: Database, target: Target) -> None:
    failed = enqueue(db, JobBuilder("discard", {})).id
    drain_jobs(db, registry)
    doc = cli_json(target, "bulk", "retry", "--worker", "discard", "--state", "discarded", "--yes")
    assert doc["changed"] == 1 and state_of(db, failed) is JobState.AVAILABLE
    nothing = cli(target, "bulk", "retry", "--worker", "discard", "--state", "discarded")
    assert nothing.exit_code == 0 and nothing.stdout == "bulk retry: 0 changed\n"  # no prompt


def test_an_empty_filter_needs_all(db: Database, target: Target) -> None:
    enqueue(db, JobBuilder("ok", {}))
    refused = cli(target, "bulk", "cancel", "--yes")
    assert refused.exit_code == 2 and "--all" in refused.stderr
    assert cli_json(target, "bulk", "cancel", "--all", "--yes")["changed"] == 1
    assert cli(target, "bulk", "cancel", "--state", "sleeping").exit_code == 2
    assert cli(target, "bulk", "cancel", "--all", "--batch", "0", "--yes").exit_code == 2


def completed_and_failed(
    db: Database, queue: str, done: int, failed: int
) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    completed = [enqueue(db, JobBuilder("ok", {"n": n}).queue(queue)).id for n in range(done)]
    drain_jobs(db, registry, queue=queue)
    discarded = [
        enqueue(db, JobBuilder("discard", {"n": n}).queue(queue)).id for n in range(failed)
    ]
    drain_jobs(db, registry, queue=queue)
    return completed, discarded


def test_bulk_retry_leaves_completed_jobs_alone_unless_asked(db: Database, target: Target) -> None:
    completed, discarded = completed_and_failed(db, "billing", 3, 2)
    dry = cli_json(target, "bulk", "retry", "--queue", "billing", "--dry-run")
    assert (dry["count"], dry["completed_excluded"], dry["include_completed"]) == (2, 3, False)
    human = cli(target, "bulk", "retry", "--queue", "billing", "--dry-run")
    assert human.exit_code == 0 and "would change 2 jobs" in human.stdout
    assert "3 completed jobs left out" in human.stderr and "--include-completed" in human.stderr
    done = cli(target, "bulk", "retry", "--queue", "billing", "--yes")
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("bulk retry: 2 changed (3 completed jobs left out")
    assert {state_of(db, i) for i in completed} == {JobState.COMPLETED}
    assert {state_of(db, i) for i in discarded} == {JobState.AVAILABLE}
    # Naming the completed state without the flag is a usage error that changes nothing.
    refused = cli(target, "bulk", "retry", "--state", "completed", "--yes")
    assert refused.exit_code == 2 and "--include-completed" in refused.stderr
    assert {state_of(db, i) for i in completed} == {JobState.COMPLETED}
    asked = cli_json(
        target,
        "bulk",
        "retry",
        "--queue",
        "billing",
        "--state",
        "completed",
        "--include-completed",
        "--yes",
    )
    assert (asked["changed"], asked["include_completed"]) == (3, True)
    assert {state_of(db, i) for i in completed} == {JobState.AVAILABLE}


def test_every_job_with_all_still_skips_completed_jobs(db: Database, target: Target) -> None:
    completed, failed = completed_and_failed(db, "default", 2, 1)
    doc = cli_json(target, "bulk", "retry", "--all", "--yes")
    assert (doc["matched"], doc["changed"]) == (1, 1)
    assert {state_of(db, i) for i in completed} == {JobState.COMPLETED}
    assert {state_of(db, i) for i in failed} == {JobState.AVAILABLE}
    (entry,) = list_audit(db, action="bulk_retry").entries
    assert entry.details["all_jobs"] is True and entry.details["include_completed"] is False


def test_the_action_applies_to_the_previewed_jobs_only(
    db: Database, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    previewed = [enqueue(db, JobBuilder("ok", {"n": n}).queue("mailers")).id for n in range(4)]
    late: list[uuid.UUID] = []

    def preview_then_the_world_moves(*args: Any, **kwargs: Any) -> BulkPreview:
        preview = real_preview(*args, **kwargs)
        late.append(enqueue(db, JobBuilder("ok", {"late": True}).queue("mailers")).id)
        cancel_job(db, previewed[0], Actor("bob", "ops-2"), utcnow())
        return preview

    real_preview = bulk.bulk_preview
    monkeypatch.setattr(bulk, "bulk_preview", preview_then_the_world_moves)
    result = cli(target, "bulk", "discard", "--queue", "mailers", "--yes")
    assert result.exit_code == 0, result.output
    assert result.stdout == "bulk discard: 3 changed, 1 had moved on\n"
    assert {state_of(db, i) for i in previewed[1:]} == {JobState.DISCARDED}
    assert state_of(db, previewed[0]) is JobState.CANCELLED
    assert state_of(db, late[0]) is JobState.AVAILABLE  # arrived after the preview
    (entry,) = list_audit(db, action="bulk_discard").entries
    assert entry.details["moved_on"] == 1 and entry.details["previewed"] == 4


def test_a_large_set_or_every_job_needs_the_count_typed(
    db: Database, target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [enqueue(db, JobBuilder("ok", {"n": n}).queue("big")).id for n in range(101)]
    refused = cli(target, "bulk", "cancel", "--queue", "big")  # no terminal, no --yes
    assert refused.exit_code == 2 and "--yes" in refused.stderr
    monkeypatch.setattr(confirm, "interactive", lambda: True)
    wrong = runner.invoke(
        app, [*target.cli_args(), "bulk", "cancel", "--queue", "big"], input="y\n"
    )
    assert wrong.exit_code == 1 and "Type the number of jobs (101)" in wrong.stderr
    assert "aborted: y is not 101" in wrong.stderr
    assert {state_of(db, i) for i in ids} == {JobState.AVAILABLE}
    typed = runner.invoke(
        app, [*target.cli_args(), "bulk", "cancel", "--queue", "big"], input="101\n"
    )
    assert typed.exit_code == 0, typed.output
    assert typed.stdout.endswith("bulk cancel: 101 changed\n")  # after the echoed input
    assert {state_of(db, i) for i in ids} == {JobState.CANCELLED}
    # With no filter, even a handful of jobs needs the count.
    few = [enqueue(db, JobBuilder("ok", {"n": n})).id for n in range(2)]
    every = runner.invoke(app, [*target.cli_args(), "bulk", "discard", "--all"], input="\n")
    assert every.exit_code == 1 and "EVERY job" in every.stderr
    assert {state_of(db, i) for i in few} == {JobState.AVAILABLE}
    assert bulk.bulk_preview(db, "discard", JobFilter(), all_jobs=True).count == 2
