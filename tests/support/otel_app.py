"""A worker application traced with OpenTelemetry, imported by executor processes.

As an application would, it configures its tracer provider at import, so each executor
process has its own: here a span processor writing each finished span as one JSON line to the
file named by ``KST_OTEL_SPANS`` (executors inherit the environment), for tests to read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from kickside_engine import Backoff, Job, WorkerRegistry
from kickside_engine.telemetry.otel import instrument

IMMEDIATE = Backoff(
    base=timedelta(0), exponent=0, jitter_per_attempt=timedelta(0), cap=timedelta(0)
)


class JsonLinesExporter(SpanExporter):
    """Appends each span (ids as hex, its parent, links, attributes, status) to a file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a") as fh:
            for span in spans:
                fh.write(json.dumps(describe(span)) + "\n")
        return SpanExportResult.SUCCESS


def describe(span: ReadableSpan) -> dict[str, Any]:
    """A span as plain data: what the tests compare."""
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "links": [f"{link.context.span_id:016x}" for link in span.links],
        "attributes": dict(span.attributes or {}),
        "status": span.status.status_code.name,
        "pid": os.getpid(),
    }


def read_spans(path: str) -> list[dict[str, Any]]:
    """The spans exported so far (every process's)."""
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh.read().splitlines()]


if os.environ.get("KST_OTEL_SPANS"):  # an executor process: its own provider, set at import
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(JsonLinesExporter(os.environ["KST_OTEL_SPANS"]))
    )
    trace.set_tracer_provider(provider)

registry = WorkerRegistry()
instrument(registry)


@registry.worker("flaky", backoff=IMMEDIATE)
def flaky(args: dict[str, Any], job: Job) -> dict[str, int]:
    """Fails its first attempt, succeeds on the next."""
    if job.attempt == 1:
        raise ConnectionError("upstream reset: token=hunter2")
    return {"attempt": job.attempt}
