"""Results: what a worker returns is stored on the job, checked and capped, read back by
``get_job`` and ``wait_for`` (from another process too), and shown redacted."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import (
    MAX_RESULT_BYTES,
    Database,
    Done,
    JobBuilder,
    JobResult,
    JobState,
    NotFoundError,
    WaitTimeoutError,
    claim,
    complete,
    enqueue,
    get_job,
    migrate,
    wait_for,
)
from kickside_engine.clock import utcnow
from kickside_engine.outcomes import ResultNotStorableError, storable_result
from kickside_engine.plugins.pruner import prune
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.testing import drain_jobs, perform_job
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support import results_app
from ..support.processes import wait_for as eventually

ROOT = Path(__file__).resolve().parents[2]


def _job(db: Database, worker: str, args: dict[str, object] | None = None) -> uuid.UUID:
    return enqueue(db, JobBuilder(worker, args or {})).id


def test_storable_result_is_the_json_form_and_names_what_it_refuses() -> None:
    assert storable_result({"a": (1, 2)}) == {"a": [1, 2]}
    with pytest.raises(ResultNotStorableError, match="result of type set cannot be stored"):
        storable_result({1, 2})
    with pytest.raises(ResultNotStorableError, match="result of type float"):
        storable_result(float("nan"))
    with pytest.raises(ResultNotStorableError, match=f"over the {MAX_RESULT_BYTES} byte limit"):
        storable_result("x" * MAX_RESULT_BYTES)
    assert MAX_RESULT_BYTES == 1024 * 1024


def test_results_are_stored_and_unstorable_ones_fail_the_attempt(db: Database) -> None:
    ids = {
        name: _job(db, name, {"url": "https://example.com", "n": 7})
        for name in ("fetch_url", "done_with_result", "nothing", "huge_result", "set_result")
    }
    drain_jobs(db, results_app.registry)
    jobs = {name: get_job(db, i) for name, i in ids.items()}
    assert jobs["fetch_url"].result == {  # type: ignore[union-attr]
        "url": "https://example.com",
        "status": 200,
        "sizes": [1, 2],
    }
    assert jobs["done_with_result"].result == [7, "done"]  # type: ignore[union-attr]
    assert jobs["nothing"].result is None  # type: ignore[union-attr]
    assert {n: j.state for n, j in jobs.items()} == {  # type: ignore[union-attr]
        "fetch_url": JobState.COMPLETED,
        "done_with_result": JobState.COMPLETED,
        "nothing": JobState.COMPLETED,
        "huge_result": JobState.RETRYABLE,
        "set_result": JobState.RETRYABLE,
    }
    huge = jobs["huge_result"]
    assert huge is not None and huge.result is None
    assert "result of type dict is 10485772 bytes of JSON, over the 1048576 byte limit" in (
        huge.errors[-1].error
    )
    refused = jobs["set_result"]
    assert refused is not None and refused.result is None
    assert refused.errors[-1].error.startswith("result of type set cannot be stored as JSON")
    # A job without a result stores SQL NULL, not the JSON null.
    with db.read() as conn:
        nulls = conn.execute(
            sa.select(sa.func.count()).where(
                db.tables.job.c.result.is_(None), db.tables.job.c.id == ids["nothing"]
            )
        ).scalar_one()
    assert nulls == 1


def test_perform_job_returns_the_result_as_it_would_be_stored() -> None:
    assert perform_job(results_app.nothing, {}) == Done()
    assert perform_job(results_app.done_with_result, {"n": 1}) == Done(result=[1, "done"])
    assert perform_job(results_app.fetch_url, {"url": "u"}) == Done(
        result={"url": "u", "status": 200, "sizes": [1, 2]}
    )
    with pytest.raises(ResultNotStorableError, match="type set"):
        perform_job(results_app.set_result, {})


def test_wait_for_returns_a_final_job_and_names_unknown_ids(db: Database) -> None:
    job_id = _job(db, "done_with_result", {"n": 3})
    drain_jobs(db, results_app.registry)
    assert wait_for(db, job_id, timeout=5) == JobResult(
        job_id, JobState.COMPLETED, [3, "done"], None
    )
    assert wait_for(db, str(job_id)).result == [3, "done"]
    for unknown in (str(uuid.uuid4()), "not-a-uuid"):
        with pytest.raises(NotFoundError, match="no job with id"):
            wait_for(db, unknown, timeout=1)


def test_wait_for_times_out_without_a_busy_loop(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = _job(db, "nothing")
    reads = 0
    real = get_job

    def counting(*args: object, **kwargs: object) -> object:
        nonlocal reads
        reads += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("kickside_engine.waiting.get_job", counting)
    started = time.monotonic()
    with pytest.raises(WaitTimeoutError, match=r"is still available after waiting 0\.5s") as caught:
        wait_for(db, job_id, timeout=0.5)
    assert 0.5 <= time.monotonic() - started < 3
    assert caught.value.exit_code == 4
    assert caught.value.details == {"job_id": str(job_id), "state": "available"}
    assert reads < 20  # 10 ms growing to 200 ms: a dozen reads in half a second, not thousands


def test_kickside_job_shows_the_result_redacted(db: Database, target: Target) -> None:
    job_id = _job(db, "secret_result")
    drain_jobs(db, results_app.registry)
    assert get_job(db, job_id).result == {"user": "ada", "password": "hunter2"}  # type: ignore[union-attr]
    runner = CliRunner()
    done = runner.invoke(app, [*target.cli_args(), "job", str(job_id), "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["job"]["result"] == {"user": "ada", "password": "[REDACTED]"}
    human = runner.invoke(app, [*target.cli_args(), "job", str(job_id)])
    assert human.exit_code == 0, human.output
    assert "hunter2" not in human.stdout and "[REDACTED]" in human.stdout


def test_migration_0006_adds_and_drops_the_result_column(db: Database) -> None:
    def columns() -> set[str]:
        with db.read(check_schema=False) as conn:
            inspector = sa.inspect(conn)
            return {c["name"] for c in inspector.get_columns("kickside_job", schema=db.schema)}

    assert "result" in columns()
    migrate.downgrade(db, "0005")
    assert "result" not in columns()
    assert migrate.upgrade(db).up_to_date
    assert "result" in columns()


@pytest.mark.slow
def test_results_round_trip_a_process_pool_and_wait_for_from_another_process(
    db: Database, target: Target
) -> None:
    slow = _job(db, "fetch_url", {"url": "https://example.com/a", "sleep_s": 0.5})
    done = _job(db, "done_with_result", {"n": 5})
    huge = _job(db, "huge_result")
    waiter_code = f"""
        import json
        from kickside_engine import connect_database, wait_for
        db = connect_database({target.url!r}, schema={target.schema!r})
        print("waiting", flush=True)
        r = wait_for(db, {str(slow)!r}, timeout=120)
        print(json.dumps({{"state": r.state.value, "result": r.result, "error": r.error}}))
        db.dispose()
        """
    waiter = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(waiter_code)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert waiter.stdout is not None
        assert waiter.stdout.readline().strip() == "waiting"
        pool = WorkerPool(
            db,
            PoolConfig(
                queues={"default": 2},
                mode="process",
                app="tests.support.results_app",
                run_plugins=False,
            ),
        )
        pool.start()
        try:
            eventually(
                lambda: (
                    get_job(db, done).state is JobState.COMPLETED  # type: ignore[union-attr]
                    and get_job(db, huge).errors
                ),  # type: ignore[union-attr]
                120,
                "the result jobs settled",
            )
            out, err = waiter.communicate(timeout=120)
        finally:
            pool.stop(30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 0, err
    assert json.loads(out) == {
        "state": "completed",
        "result": {"url": "https://example.com/a", "status": 200, "sizes": [1, 2]},
        "error": None,
    }
    assert get_job(db, done).result == [5, "done"]  # type: ignore[union-attr]
    refused = get_job(db, huge)
    assert refused is not None and refused.state is JobState.RETRYABLE
    assert refused.result is None and "over the 1048576 byte limit" in refused.errors[-1].error


def test_complete_by_hand_stores_a_result_and_refuses_an_unstorable_one(db: Database) -> None:
    job_id = _job(db, "nothing")
    (claimed,) = claim(db, queue="default", node="by-hand")
    with pytest.raises(ResultNotStorableError, match="type set"):
        complete(db, claimed, result={1})
    assert get_job(db, job_id).state is JobState.EXECUTING  # type: ignore[union-attr]
    assert complete(db, claimed, result={"rows": 3})
    assert wait_for(db, job_id, timeout=1).result == {"rows": 3}


def test_a_result_goes_with_its_pruned_job(db: Database) -> None:
    job_id = _job(db, "fetch_url", {"url": "u"})
    drain_jobs(db, results_app.registry)
    assert get_job(db, job_id).result is not None  # type: ignore[union-attr]
    assert prune(db, utcnow() + timedelta(days=30)) == 1
    with pytest.raises(NotFoundError):
        wait_for(db, job_id, timeout=1)


RESULTS = [{"rows": [1, 2], "note": "ünïcode"}, "a string", 42, [None, True]]


def test_a_batch_of_results_settles_in_one_statement_and_fenced(db: Database) -> None:
    from kickside_engine import enqueue_many
    from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
    from kickside_engine.store.settle import settle_batch, settle_batch_unnest

    enqueue_many(db, [JobBuilder("nothing", {"i": i}) for i in range(5)])
    claimed = claim(db, queue="default", node="n1", limit=5)
    settlements = [
        settlement_for(c, ExecutionResult(ResultKind.DONE, utcnow(), 3, result=r))
        for c, r in zip(claimed, RESULTS, strict=False)
    ]
    lost = settlement_for(claimed[4], ExecutionResult(ResultKind.DONE, utcnow(), 3, result="x"))
    lost = replace(lost, lease_token=uuid.uuid4())  # not the lease holder: records nothing
    with db.begin() as conn:
        if db.is_postgresql:  # one shape of batch: the single-statement path
            assert settle_batch_unnest(db, conn, [*settlements, lost])
        else:
            settle_batch(db, conn, [*settlements, lost])
    assert [get_job(db, c.job.id).result for c in claimed[:4]] == RESULTS  # type: ignore[union-attr]
    untouched = get_job(db, claimed[4].job.id)
    assert untouched is not None and untouched.state is JobState.EXECUTING
    assert untouched.result is None


def test_a_slot_keeps_its_latest_runs_result(db: Database) -> None:
    builder = JobBuilder("done_with_result", {"n": 1}).slot("app.sync", "t:1", "k", demand=True)
    job_id = enqueue(db, builder).id
    drain_jobs(db, results_app.registry)
    slot = get_job(db, job_id)
    assert slot is not None and slot.state is JobState.PARKED and slot.result == [1, "done"]
    enqueue(db, builder)  # demand again: the parked slot is due
    (claimed,) = claim(db, queue="default", node="n1")
    assert claimed.job.id == job_id
    assert complete(db, claimed)  # a run without a result clears the last one
    assert get_job(db, job_id).result is None  # type: ignore[union-attr]
