"""OpenTelemetry tracing (``kickside[otel]``) through the testing helpers, on both backends:
the enqueue writes a ``traceparent`` into the job's meta, each attempt is a span of its own,
a child of the enqueuing span and linked to it; a failing attempt is recorded, redacted."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kickside_engine import (
    Backoff,
    Database,
    Job,
    JobState,
    Snooze,
    WorkerRegistry,
    connect_async_database,
    enqueue_fanout,
    enqueue_many,
    get_job,
)
from kickside_engine.redact import redact_meta
from kickside_engine.telemetry.otel import enqueue_span_context, instrument, trace_context
from kickside_engine.testing import drain_jobs, perform_job

from ..conftest import Target

IMMEDIATE = Backoff(
    base=timedelta(0), exponent=0, jitter_per_attempt=timedelta(0), cap=timedelta(0)
)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def app(provider: TracerProvider) -> dict[str, Any]:
    registry = WorkerRegistry()
    instrument(registry, tracer_provider=provider)

    @registry.worker("flaky", backoff=IMMEDIATE)
    def flaky(args: dict[str, Any], job: Job) -> dict[str, int]:
        if job.attempt == 1:
            raise ConnectionError("upstream reset: token=hunter2")
        return {"attempt": job.attempt}

    @registry.worker("later")
    def later(args: dict[str, Any], job: Job) -> Snooze:
        return Snooze(timedelta(minutes=1))

    @registry.worker("greet")
    async def greet(args: dict[str, Any], job: Job) -> str:
        return "hello"

    return {"registry": registry, "flaky": flaky, "later": later, "greet": greet}


def _jobs(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("kickside.job")]
    return sorted(spans, key=lambda s: s.attributes["kickside.job.attempt"])  # type: ignore[index]


def test_a_failing_attempt_and_its_retry_are_spans_under_the_enqueuing_span(
    db: Database, app: dict[str, Any], provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with provider.get_tracer("app").start_as_current_span("POST /orders") as request:
        inserted = app["flaky"].new({"order": 7}).insert(db)
    enqueuing = request.get_span_context()

    job = get_job(db, inserted.id)
    assert job is not None
    # The meta carries the W3C traceparent of the span current at enqueue, shown as stored.
    assert job.meta["traceparent"] == (
        f"00-{enqueuing.trace_id:032x}-{enqueuing.span_id:016x}-{enqueuing.trace_flags:02x}"
    )
    assert redact_meta(job.meta) == job.meta  # nothing secret: the dashboard shows it as is
    assert enqueue_span_context(job.meta) == trace.SpanContext(
        enqueuing.trace_id, enqueuing.span_id, is_remote=True, trace_flags=enqueuing.trace_flags
    )

    drain_jobs(db, app["registry"], with_scheduled=True)
    assert get_job(db, inserted.id).state is JobState.COMPLETED  # type: ignore[union-attr]

    first, retry = _jobs(exporter)
    for span, attempt in ((first, 1), (retry, 2)):
        assert span.name == "kickside.job flaky"
        assert span.kind is trace.SpanKind.CONSUMER
        assert span.context.trace_id == enqueuing.trace_id
        assert span.parent is not None and span.parent.span_id == enqueuing.span_id
        assert [link.context.span_id for link in span.links] == [enqueuing.span_id]
        assert span.attributes == {
            "kickside.job.id": str(inserted.id),
            "kickside.job.queue": "default",
            "kickside.job.worker": "flaky",
            "kickside.job.attempt": attempt,
            "kickside.job.max_attempts": 20,
            "kickside.job.outcome": "error" if attempt == 1 else "done",
        }
    assert retry.context.span_id != first.context.span_id
    # The failure is on the first span, redacted as Kickside stores errors.
    assert first.status.status_code is trace.StatusCode.ERROR
    assert retry.status.status_code is trace.StatusCode.UNSET
    (event,) = first.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "ConnectionError"  # type: ignore[index]
    assert "hunter2" not in str(event.attributes) and "hunter2" not in str(first.status)
    assert "upstream reset" in event.attributes["exception.message"]  # type: ignore[index]


def test_a_job_enqueued_outside_any_span_runs_in_a_trace_of_its_own(
    db: Database, app: dict[str, Any], exporter: InMemorySpanExporter
) -> None:
    inserted = app["later"].new({}).insert(db)
    assert "traceparent" not in get_job(db, inserted.id).meta  # type: ignore[union-attr]
    drain_jobs(db, app["registry"])
    (span,) = _jobs(exporter)
    assert span.parent is None and not span.links
    assert span.attributes["kickside.job.outcome"] == "snooze"  # type: ignore[index]


def test_a_traceparent_the_application_sets_is_kept(
    db: Database, app: dict[str, Any], provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    incoming = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with provider.get_tracer("app").start_as_current_span("elsewhere"):
        inserted = app["later"].new({}).meta({"traceparent": incoming}).insert(db)
    assert get_job(db, inserted.id).meta["traceparent"] == incoming  # type: ignore[union-attr]
    drain_jobs(db, app["registry"])
    (span,) = _jobs(exporter)
    assert f"{span.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert span.parent is not None and f"{span.parent.span_id:016x}" == "b7ad6b7169203331"


def test_bulk_enqueues_carry_the_enqueuing_span(
    db: Database, app: dict[str, Any], provider: TracerProvider
) -> None:
    with provider.get_tracer("app").start_as_current_span("import") as span:
        many = enqueue_many(db, [app["later"].new({}), app["later"].new({})])
        fanned = enqueue_fanout(db, app["later"].new(), [{"n": 1}, {"n": 2}])
    expected = f"{span.get_span_context().span_id:016x}"
    for inserted in (*many, *fanned):
        traceparent = get_job(db, inserted.id).meta["traceparent"]  # type: ignore[union-attr]
        assert traceparent.split("-")[2] == expected


def test_an_async_worker_gets_its_span_too(
    app: dict[str, Any], provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with provider.get_tracer("app").start_as_current_span("request") as request:
        meta = trace_context()
    assert perform_job(app["greet"], {}, meta=meta).result == "hello"
    (span,) = _jobs(exporter)
    assert span.name == "kickside.job greet"
    assert span.parent is not None
    assert span.parent.span_id == request.get_span_context().span_id
    assert span.attributes["kickside.job.outcome"] == "done"  # type: ignore[index]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_async_insert_carries_the_enqueuing_span(
    db: Database, target: Target, app: dict[str, Any], provider: TracerProvider
) -> None:
    adb = connect_async_database(target.url, schema=target.schema, pooled=False)
    try:
        with provider.get_tracer("app").start_as_current_span("async request") as span:
            inserted = await app["later"].new({}).insert_async(adb)
    finally:
        await adb.dispose()
    traceparent = get_job(db, inserted.id).meta["traceparent"]  # type: ignore[union-attr]
    assert traceparent.split("-")[2] == f"{span.get_span_context().span_id:016x}"


def test_a_failing_enqueue_meta_provider_is_logged_and_the_job_enqueued(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    registry = WorkerRegistry()

    @registry.enqueue_meta
    def broken() -> dict[str, str]:
        raise RuntimeError("no context: password=hunter2")

    @registry.enqueue_meta
    def not_a_mapping() -> Any:
        return ["tenant"]

    @registry.enqueue_meta
    def tenant() -> dict[str, str]:
        return {"tenant": "acme", "region": "eu"}

    @registry.worker("noop")
    def noop(args: dict[str, Any], job: Job) -> None:
        return None

    caplog.set_level(logging.ERROR, logger="kickside.hooks")
    inserted = noop.new({}).meta({"region": "us"}).insert(db)  # type: ignore[attr-defined]
    # The builder's own entry wins; the providers that failed added nothing.
    assert get_job(db, inserted.id).meta == {"tenant": "acme", "region": "us"}  # type: ignore[union-attr]
    failures = [r.getMessage() for r in caplog.records if r.name == "kickside.hooks"]
    assert len(failures) == 2
    assert "broken" in failures[0] and "hunter2" not in failures[0]
    assert "not_a_mapping" in failures[1] and "list" in failures[1]
