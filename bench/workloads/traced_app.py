"""The benchmark's worker application with OpenTelemetry tracing on (workload 22).

The same workers as :mod:`bench.workloads.app`, on a registry instrumented with
:func:`~kickside_engine.telemetry.otel.instrument`, and the SDK configured as production does:
a ``BatchSpanProcessor`` (spans queued, exported off the job's thread) in front of an exporter
that drops what it is given, so the figure is the tracing's own cost, not a collector's.
Imported only by the traced pool's processes, so the plain app stays untraced.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from bench.workloads.app import KICKSIDE_CODE_VERSION, registry
from kickside_engine.telemetry.otel import instrument

__all__ = ["KICKSIDE_CODE_VERSION", "registry"]


class DroppingExporter(SpanExporter):
    """Receives every batch and keeps nothing."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(DroppingExporter()))
trace.set_tracer_provider(provider)
instrument(registry)
