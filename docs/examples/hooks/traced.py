"""A worker module traced with OpenTelemetry (``pip install 'kickside[otel]'`` and the SDK).

Executor processes import this module, so the tracer provider configured here at import is
the one each of them exports with. Here an in-memory exporter, for run_traced.py to read; in
production a ``BatchSpanProcessor(OTLPSpanExporter())`` from opentelemetry-exporter-otlp.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from kickside_engine import Backoff, Job, WorkerRegistry
from kickside_engine.telemetry.otel import instrument

spans = InMemorySpanExporter()
provider = TracerProvider(resource=Resource.create({"service.name": "shop-worker"}))
provider.add_span_processor(SimpleSpanProcessor(spans))
trace.set_tracer_provider(provider)  # once per process, at import

registry = WorkerRegistry()
instrument(registry)  # a traceparent in each job's meta at enqueue, a span per attempt

calls: list[int] = []


@registry.worker("charge", backoff=Backoff(base=timedelta(seconds=1)))
def charge(args: dict[str, Any], job: Job) -> dict[str, Any]:
    calls.append(job.attempt)
    if job.attempt == 1:
        raise ConnectionError("payment provider timed out")  # retried: a new span
    return {"order": args["order"], "charged": True}
