"""`kickside worker --log-format json`: one JSON object per record, the fields of the key=value
records, redacted alike; a failing hook is one of those records and the pool runs on."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from kickside_engine import Database, JobState, get_job
from kickside_engine.logs import JsonFormatter, KeyValueFormatter

from ..conftest import Target
from ..support import hooks_app
from ..support.processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow


def _records(path: Path) -> list[dict[str, Any]]:
    """The JSON records written so far (the worker's first line is a note, not a record)."""
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def test_worker_writes_json_records_with_the_same_redacted_fields(
    db: Database, target: Target, tmp_path: Path
) -> None:
    out = tmp_path / "worker.out"
    ok = hooks_app.echo.new({}).insert(db)
    refused = hooks_app.echo.new({"refuse": True}).max_attempts(1).insert(db)
    proc = start_worker(
        target.cli_args(),
        app="tests.support.hooks_app",
        queues="default:2",
        extra=["--log-format", "json"],
        env={"KST_HOOKS_LOG": str(tmp_path / "hooks.log")},
        log=out,
    )
    try:
        wait_for(
            lambda: get_job(db, refused.id).state is JobState.DISCARDED,  # type: ignore[union-attr]
            60,
            "the refused job",
        )
        wait_for(
            lambda: get_job(db, ok.id).state is JobState.COMPLETED,  # type: ignore[union-attr]
            60,
            "the ok job",
        )
        # The pool runs on after its hooks failed: a job enqueued now runs too.
        later = hooks_app.echo.new({}).insert(db)
        wait_for(
            lambda: get_job(db, later.id).state is JobState.COMPLETED,  # type: ignore[union-attr]
            60,
            "a later job",
        )
    finally:
        assert stop(proc) == 0
    text = out.read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    records = _records(out)
    # Every line but the worker's opening note (and a traceback's lines, none here) is JSON.
    assert len(records) == len(lines) - 1, text
    for record in records:
        assert {"time", "level", "logger", "message"} <= set(record)
    jobs = [r for r in records if r["logger"] == "kickside.job"]
    (start,) = [r for r in jobs if r["message"] == "job.start" and r["job_id"] == str(ok.id)]
    assert start["worker"] == "echo" and start["queue"] == "default" and start["attempt"] == 1
    assert isinstance(start["queue_ms"], int)
    (done,) = [r for r in jobs if r["message"] == "job.stop" and r["job_id"] == str(ok.id)]
    assert done["outcome"] == "done" and isinstance(done["duration_ms"], int)
    (failed,) = [r for r in jobs if r["message"] == "job.exception"]
    assert failed["job_id"] == str(refused.id) and failed["level"] == "ERROR"
    assert "middleware refused: password=[REDACTED]" in failed["error"]
    hooks = [r for r in records if r["logger"] == "kickside.hooks"]
    assert {r["hook"] for r in hooks} == {"broken_start", "broken_stop"}
    assert len(hooks) == 6  # each of the three jobs, once each
    assert "hunter2" not in text


def _record(**fields: Any) -> logging.LogRecord:
    record = logging.LogRecord("kickside.pool", logging.WARNING, __file__, 1, "%s", ("m",), None)
    record.__dict__.update(fields)
    return record


def test_json_fields_are_redacted_as_their_key_value_text_is() -> None:
    record = _record(
        password="hunter2",
        url="postgresql://app:s3cret@db/jobs",
        count=3,
        ratio=0.5,
        missing=None,
        note="Bearer abc.def.ghi",
    )
    document = json.loads(JsonFormatter().format(record))
    text = KeyValueFormatter().format(record)
    assert document["password"] == "[REDACTED]" and "password=[REDACTED]" in text
    assert document["url"] == "postgresql://app:[REDACTED]@db/jobs"
    assert (document["count"], document["ratio"], document["missing"]) == (3, 0.5, None)
    assert "abc.def.ghi" not in document["note"] and "abc.def.ghi" not in text
    assert document["time"].endswith("+00:00") and document["message"] == "m"
