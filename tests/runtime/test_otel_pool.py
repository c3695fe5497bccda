"""OpenTelemetry tracing through a real process pool, on both backends: each executor process
configures its tracer provider at import of the worker module (``tests/support/otel_app.py``),
and a job enqueued in a span fails once, is retried, and both attempts' spans, exported from
the executor, hang under the enqueuing span and link to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kickside_engine import Database, JobState, get_job
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..support import otel_app
from ..support.processes import wait_for

pytestmark = pytest.mark.slow


def test_attempts_in_executor_processes_are_spans_linked_to_the_enqueue(
    db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans_file = str(tmp_path / "spans.jsonl")
    monkeypatch.setenv("KST_OTEL_SPANS", spans_file)  # executors inherit it
    provider = TracerProvider()  # the enqueuing side's own, as a web application has
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("app").start_as_current_span("POST /orders") as request:
        inserted = otel_app.flaky.new({"order": 7}).insert(db)  # type: ignore[attr-defined]
    enqueuing = request.get_span_context()

    config = PoolConfig(
        app="tests.support.otel_app",
        queues={"default": 2},
        process_executors=1,
        run_plugins=True,  # the stager makes the retry available
    )
    pool = WorkerPool(db, config)
    pool.start()
    try:
        wait_for(
            lambda: get_job(db, inserted.id).state is JobState.COMPLETED,  # type: ignore[union-attr]
            60,
            "the retried job completed",
        )
        wait_for(lambda: len(otel_app.read_spans(spans_file)) == 2, 10, "two exported spans")
    finally:
        pool.stop(30)
    provider.shutdown()

    first, retry = sorted(
        otel_app.read_spans(spans_file), key=lambda s: s["attributes"]["kickside.job.attempt"]
    )
    for span, outcome in ((first, "error"), (retry, "done")):
        assert span["name"] == "kickside.job flaky"
        assert span["trace_id"] == f"{enqueuing.trace_id:032x}"
        assert span["parent"] == f"{enqueuing.span_id:016x}"
        assert span["links"] == [f"{enqueuing.span_id:016x}"]
        assert span["attributes"]["kickside.job.id"] == str(inserted.id)
        assert span["attributes"]["kickside.job.outcome"] == outcome
    assert first["status"] == "ERROR" and retry["status"] == "UNSET"
    assert first["span_id"] != retry["span_id"]
    assert first["pid"] != os.getpid()  # exported by the executor process, not this one
