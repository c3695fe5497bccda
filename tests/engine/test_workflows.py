"""Workflows: jobs wait in ``waiting`` until their upstream jobs are final, are released once,
read their upstreams' results, follow each dependency's failure policy, and are cancelled,
retried and pruned as wholes. Both backends; the racing release is in test_workflow_race.py."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    After,
    ConflictError,
    Database,
    Discard,
    InvalidArgumentError,
    Job,
    JobBuilder,
    JobState,
    NotFoundError,
    WorkerRegistry,
    Workflow,
    batch,
    get_job,
    get_workflow,
    upstream_results,
)
from kickside_engine.audit import Actor
from kickside_engine.clock import utcnow
from kickside_engine.control import (
    cancel_job,
    cancel_workflow,
    cancelable,
    delete_job,
    discard_job,
    explain,
    retry_workflow,
)
from kickside_engine.plugins.pruner import prune
from kickside_engine.plugins.stager import stage
from kickside_engine.testing import drain_jobs

from ..conftest import Target

ACTOR = Actor("ops", "laptop")


def _registry(db: Database, ran: list[str], fail: set[str] | None = None) -> WorkerRegistry:
    registry = WorkerRegistry()
    failing = fail or set()

    @registry.worker("step", max_attempts=1)
    def step(args: dict[str, Any], job: Job) -> Any:
        ran.append(args["name"])
        if args["name"] in failing:
            return Discard("broken on purpose")
        upstreams = upstream_results(db, job)
        return {"name": args["name"], "saw": sorted(upstreams)}

    return registry


def _job(name: str) -> JobBuilder:
    return JobBuilder("step", {"name": name})


def _diamond(workflow_id: str = "import-42", thumbs: int = 3) -> Workflow:
    wf = Workflow(workflow_id)
    wf.add("fetch", _job("fetch"))
    wf.add("parse", _job("parse"), after=["fetch"])
    wf.add_many("thumb", [_job(f"thumb{i}") for i in range(thumbs)], after=["parse"])
    wf.add("notify", _job("notify"), after=["thumb"])
    return wf


def _states(db: Database, workflow_id: str) -> dict[str, JobState]:
    return {s.name: s.state for s in get_workflow(db, workflow_id).steps}


def test_a_workflow_runs_in_dependency_order_and_each_step_reads_its_upstreams(
    db: Database,
) -> None:
    inserted = _diamond().insert(db)
    assert _states(db, "import-42") == {
        "fetch": JobState.AVAILABLE,
        "parse": JobState.WAITING,
        "thumb[0]": JobState.WAITING,
        "thumb[1]": JobState.WAITING,
        "thumb[2]": JobState.WAITING,
        "notify": JobState.WAITING,
    }
    ran: list[str] = []
    drain_jobs(db, _registry(db, ran))
    assert ran[:2] == ["fetch", "parse"]
    assert sorted(ran[2:5]) == ["thumb0", "thumb1", "thumb2"] and ran[5] == "notify"
    view = get_workflow(db, "import-42")
    assert view.is_final and view.state == "completed"
    notify = get_job(db, inserted["notify"])
    assert notify is not None
    assert notify.result == {"name": "notify", "saw": ["thumb[0]", "thumb[1]", "thumb[2]"]}
    results = upstream_results(db, inserted["parse"])
    assert list(results) == ["fetch"]
    assert results["fetch"].state is JobState.COMPLETED
    assert results["fetch"].result == {"name": "fetch", "saw": []}


def test_a_waiting_job_is_not_claimed_and_explain_says_what_it_waits_for(db: Database) -> None:
    inserted = _diamond().insert(db)
    ran: list[str] = []
    registry = _registry(db, ran)
    drain_jobs(db, registry, with_recursion=False)  # one pass: fetch only
    reasons = explain(db, inserted["notify"], now=utcnow()).reasons
    [reason] = reasons
    assert reason.code == "waiting_on_upstreams"
    assert reason.message.startswith("waiting on 3 of 3 upstream jobs: thumb[0] (waiting)")
    assert reason.data["workflow"] == "import-42"
    assert ran == ["fetch"]
    parse = get_job(db, inserted["parse"])
    assert parse is not None and parse.state is JobState.AVAILABLE  # released by fetch
    assert "waiting_on_upstreams" not in {
        r.code for r in explain(db, inserted["parse"], now=utcnow()).reasons
    }


def test_insert_joins_the_callers_transaction_and_a_rollback_leaves_nothing(
    db: Database,
) -> None:
    with pytest.raises(RuntimeError), db.begin() as conn:
        _diamond().insert(db, conn=conn)
        raise RuntimeError("the caller's own failure")
    with pytest.raises(NotFoundError):
        get_workflow(db, "import-42")
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar() == 0


def test_a_workflow_id_is_inserted_once(db: Database) -> None:
    _diamond().insert(db)
    with pytest.raises(ConflictError, match="workflow import-42 exists already"):
        _diamond().insert(db)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda wf: wf.add("b", _job("b"), after=["a"]), "not an earlier step"),
        (lambda wf: wf.add("a", _job("a")).add("a", _job("a")), "already has a step 'a'"),
        (lambda wf: wf.add_many("m", []), "got no jobs"),
        (lambda wf: wf.add("u", _job("u").unique(None).slot("n", "s", "k")), "slot or identity"),
        (lambda wf: wf.add("x", _job("x"), after=[After("y", on_failure="maybe")]), "on_failure"),  # type: ignore[arg-type]
        (lambda wf: wf.add("bad name", _job("b")), "invalid workflow step name"),
    ],
)
def test_a_malformed_workflow_is_refused_before_anything_is_written(
    build: Any, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        build(Workflow("w-1"))


def test_a_failed_upstream_cancels_its_downstream_by_default_in_cascade(db: Database) -> None:
    _diamond().insert(db)
    ran: list[str] = []
    drain_jobs(db, _registry(db, ran, fail={"parse"}))
    assert ran == ["fetch", "parse"]
    states = _states(db, "import-42")
    assert states["parse"] is JobState.DISCARDED
    assert all(states[f"thumb[{i}]"] is JobState.CANCELLED for i in range(3))
    assert states["notify"] is JobState.CANCELLED
    thumb = get_workflow(db, "import-42").steps[2]
    assert thumb.last_error is not None
    assert thumb.last_error.startswith("cancelled: upstream parse (")
    assert thumb.last_error.endswith("was discarded")
    assert get_workflow(db, "import-42").state == "failed"


def test_on_failure_run_lets_the_downstream_run_and_see_the_failure(db: Database) -> None:
    wf = batch("batch-7", "item", [_job(f"item{i}") for i in range(3)], then=_job("report"))
    inserted = wf.insert(db)
    ran: list[str] = []
    drain_jobs(db, _registry(db, ran, fail={"item1"}))
    assert ran[-1] == "report"
    seen = upstream_results(db, inserted["then"])
    assert {name: up.state for name, up in seen.items()} == {
        "item[0]": JobState.COMPLETED,
        "item[1]": JobState.DISCARDED,
        "item[2]": JobState.COMPLETED,
    }


def test_an_operator_cancel_of_an_upstream_releases_or_cancels_per_policy(db: Database) -> None:
    wf = Workflow("ops-1")
    wf.add("a", _job("a"))
    wf.add("strict", _job("strict"), after=["a"])
    wf.add("lenient", _job("lenient"), after=[After("a", on_failure="run")])
    inserted = wf.insert(db)
    cancel_job(db, inserted["a"], ACTOR, utcnow())
    states = _states(db, "ops-1")
    assert states == {
        "a": JobState.CANCELLED,
        "strict": JobState.CANCELLED,
        "lenient": JobState.AVAILABLE,
    }


def test_a_discarded_or_deleted_upstream_counts_as_failed(db: Database) -> None:
    wf = Workflow("ops-2")
    wf.add("a", _job("a"))
    wf.add("b", _job("b"))
    wf.add("after_both", _job("c"), after=[After("a", on_failure="run"), After("b", "run")])
    inserted = wf.insert(db)
    discard_job(db, inserted["a"], ACTOR, utcnow())
    assert _states(db, "ops-2")["after_both"] is JobState.WAITING
    delete_job(db, inserted["b"], ACTOR, utcnow())
    job = get_job(db, inserted["after_both"])
    assert job is not None and job.state is JobState.AVAILABLE


def test_a_released_job_scheduled_for_later_becomes_scheduled(db: Database) -> None:
    wf = Workflow("later-1")
    wf.add("a", _job("a"))
    wf.add("b", _job("b").schedule_in(timedelta(hours=1)), after=["a"])
    inserted = wf.insert(db)
    drain_jobs(db, _registry(db, []))
    job = get_job(db, inserted["b"])
    assert job is not None and job.state is JobState.SCHEDULED


def test_cancel_workflow_cancels_what_is_open_and_only_what_was_previewed(db: Database) -> None:
    inserted = _diamond().insert(db)
    preview = cancelable(get_workflow(db, "import-42"))
    assert len(preview) == 6
    shown = set(preview) - {inserted["thumb[2]"]}
    change = cancel_workflow(db, "import-42", ACTOR, utcnow(), only=shown)
    states = {s.job_id: s.state for s in change.workflow.steps}
    assert set(change.changed) <= shown
    assert all(states[i] is JobState.CANCELLED for i in shown)
    # thumb[2] was not previewed: the cascade from parse cancels it (its policy), not the
    # operator's action, and the audit counts only what the action itself cancelled.
    assert states[inserted["thumb[2]"]] is JobState.CANCELLED
    with db.read() as conn:
        audit = db.tables.audit
        row = conn.execute(
            sa.select(audit.c.action, audit.c.target, audit.c.details).where(
                audit.c.action == "cancel_workflow"
            )
        ).one()
    assert row.target == "import-42" and row.details["cancelled"] == len(change.changed)


def test_retry_workflow_runs_the_failed_part_again_in_order(db: Database) -> None:
    inserted = _diamond().insert(db)
    ran: list[str] = []
    drain_jobs(db, _registry(db, ran, fail={"parse"}))
    change = retry_workflow(db, "import-42", ACTOR, utcnow())
    assert set(change.changed) == {
        inserted[n] for n in ("parse", "thumb[0]", "thumb[1]", "thumb[2]", "notify")
    }
    states = _states(db, "import-42")
    assert states["fetch"] is JobState.COMPLETED
    assert states["parse"] is JobState.AVAILABLE
    assert states["notify"] is JobState.WAITING and states["thumb[0]"] is JobState.WAITING
    ran.clear()
    drain_jobs(db, _registry(db, ran))
    assert ran[0] == "parse" and ran[-1] == "notify" and "fetch" not in ran
    assert get_workflow(db, "import-42").state == "completed"


def test_the_pruner_keeps_a_workflow_until_all_of_it_is_final(db: Database) -> None:
    wf = Workflow("prune-1")
    wf.add("a", _job("a"))
    wf.add("b", _job("b"), after=["a"])
    inserted = wf.insert(db)
    drain_jobs(db, _registry(db, []), with_recursion=False)  # a completes, b released
    later = utcnow() + timedelta(days=30)
    prune(db, later, max_age=timedelta(days=7))
    assert get_job(db, inserted["a"]) is not None  # b is not final: a stays
    drain_jobs(db, _registry(db, []))
    assert prune(db, utcnow() + timedelta(days=30), max_age=timedelta(days=7)) == 2
    assert get_job(db, inserted["a"]) is None and get_job(db, inserted["b"]) is None
    with pytest.raises(NotFoundError):
        get_workflow(db, "prune-1")
    with db.read() as conn:
        for table in (db.tables.workflow_step, db.tables.workflow_edge):
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar() == 0


def test_the_stager_releases_what_a_workflow_unaware_settle_left_behind(db: Database) -> None:
    wf = Workflow("old-pool")
    wf.add("a", _job("a"))
    wf.add("b", _job("b"), after=["a"])
    inserted = wf.insert(db)
    now = utcnow()
    # What a pool of older code does: the upstream's row goes final, its edges stay open.
    with db.begin() as conn:
        conn.execute(
            sa.update(db.tables.job)
            .where(db.tables.job.c.id == inserted["a"])
            .values(state="completed", finalized_at=now, completed_at=now)
        )
    assert _states(db, "old-pool")["b"] is JobState.WAITING
    stage(db, utcnow())
    assert _states(db, "old-pool")["b"] is JobState.AVAILABLE
    stage(db, utcnow())  # nothing left to resolve: idempotent
    assert _states(db, "old-pool")["b"] is JobState.AVAILABLE


def test_a_workflow_inserted_by_two_racing_processes_exists_once(
    db: Database, target: Target
) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from kickside_engine import ConflictError, JobBuilder, Workflow, connect_database
        db = connect_database({target.url!r}, schema={target.schema!r})
        wf = Workflow("race-insert")
        wf.add("a", JobBuilder("a", {{}}))
        wf.add_many("b", [JobBuilder("b", {{"i": i}}) for i in range(50)], after=["a"])
        time.sleep(max(0.0, float(sys.argv[1]) - time.time()))
        try:
            wf.insert(db)
            print("inserted")
        except ConflictError as exc:
            print("refused:", exc)
        """
    )
    at = str(time.time() + 2.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, at], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=60) for p in procs]
    said = sorted(out.decode().strip() for out, _ in outputs)
    assert said == [
        "inserted",
        "refused: workflow race-insert exists already",
    ], [err.decode()[-2000:] for _, err in outputs]
    assert len(get_workflow(db, "race-insert").steps) == 51


def test_doctor_finds_a_waiting_job_with_nothing_left_to_wait_for(db: Database) -> None:
    from kickside_engine.control.consistency import find_inconsistencies

    wf = Workflow("doctor-1")
    wf.add("a", _job("a"))
    wf.add("b", _job("b"), after=["a"])
    inserted = wf.insert(db)
    assert find_inconsistencies(db) == []
    with db.begin() as conn:  # what no engine path does: the count gone, the job still waiting
        conn.execute(
            sa.update(db.tables.workflow_step)
            .where(db.tables.workflow_step.c.job_id == inserted["b"])
            .values(upstreams_pending=0)
        )
    [found] = find_inconsistencies(db)
    assert found.check == "waiting_without_upstreams" and found.job_ids == (inserted["b"],)
