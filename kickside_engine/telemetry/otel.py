"""OpenTelemetry tracing for a registry's jobs (install ``kickside[otel]``).

:func:`instrument` turns it on for one :class:`~kickside_engine.workers.WorkerRegistry`::

    from kickside_engine.telemetry.otel import instrument

    registry = WorkerRegistry()
    instrument(registry)  # in the module that declares the workers: executors import it

It adds two things, both on the registry's own extension points:

- **At enqueue**, an ``enqueue_meta`` provider writes the current span's context into the
  job's meta as a W3C ``traceparent`` (and ``tracestate`` when there is one): plain hex ids,
  not secret, shown as they are in ``kickside job`` and the dashboard. With no recording span
  current, nothing is added. A ``traceparent`` the application sets itself
  (``.meta({"traceparent": ...})``, from an incoming request) is kept.
- **Around each execution**, a middleware (sync and async) opens a ``CONSUMER`` span named
  ``kickside.job <worker>``, a child of the enqueuing span and linked to it, with the
  attributes ``kickside.job.id``, ``.queue``, ``.worker``, ``.attempt``, ``.max_attempts``
  and ``kickside.job.outcome`` (``done``, ``error``, ``snooze``, ``cancel``, ``discard``). An
  exception is recorded on the span (an ``exception`` event and status ``ERROR``, message and
  traceback redacted as Kickside stores them) and raised on unchanged.

Each attempt is a span of its own: a retry is a new span with the same parent and the same
link, so every attempt of a job hangs under the span that enqueued it, told apart by
``kickside.job.attempt``. An attempt that never returns to the middleware (its process killed
at its max execution, or crashing) ends no span; the next attempt's span still appears.

Spans go to the tracer provider given, else to the global one when the span starts: configure
it in each process that runs jobs, for a process pool at import of the worker module (each
executor process imports it), as the application's entry point does for the enqueuing side.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from kickside_engine.errors import ConfigurationError
from kickside_engine.models import Job
from kickside_engine.outcomes import Cancel, Discard, Snooze
from kickside_engine.redact import redact_text

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - the extra is not installed
    raise ConfigurationError(
        "OpenTelemetry tracing needs opentelemetry-api, which the otel extra installs: "
        "pip install 'kickside[otel]'"
    ) from None

if TYPE_CHECKING:
    from kickside_engine.workers import WorkerRegistry

SCOPE = "kickside"
#: The meta keys the enqueue writes: W3C Trace Context's header names.
TRACEPARENT, TRACESTATE = "traceparent", "tracestate"
_PROPAGATOR = TraceContextTextMapPropagator()


def instrument(
    registry: WorkerRegistry, *, tracer_provider: trace.TracerProvider | None = None
) -> None:
    """Trace ``registry``'s jobs: a ``traceparent`` in each job's meta at enqueue, and a span
    around each execution linked to it (see the module's docstring).

    Call it once per registry, where the registry is built, so that the enqueuing processes
    and every executor process get it. ``tracer_provider`` defaults to the global provider,
    looked up when each span starts (so one configured after this call is used).
    """
    tracing = _Tracing(tracer_provider)
    registry.enqueue_meta(trace_context)
    registry.middleware(tracing.sync_span)
    registry.middleware(tracing.async_span)


def trace_context() -> dict[str, str]:
    """The current span's context as W3C Trace Context entries (empty without a valid span)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier


def enqueue_span_context(meta: Mapping[str, Any]) -> trace.SpanContext | None:
    """The span context a job's meta carries from its enqueue, or None."""
    carrier = {
        key: meta[key] for key in (TRACEPARENT, TRACESTATE) if isinstance(meta.get(key), str)
    }
    if TRACEPARENT not in carrier:
        return None
    span_context = trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    return span_context if span_context.is_valid else None


class _Tracing:
    """The execution middleware: one span per attempt."""

    def __init__(self, tracer_provider: trace.TracerProvider | None) -> None:
        self._provider = tracer_provider

    def _start(self, job: Job) -> trace.Span:
        tracer = trace.get_tracer(SCOPE, tracer_provider=self._provider)
        parent = enqueue_span_context(job.meta)
        links = [trace.Link(parent)] if parent is not None else []
        ctx = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else None
        return tracer.start_span(
            f"kickside.job {job.worker}",
            context=ctx if ctx is not None else otel_context.Context(),
            kind=trace.SpanKind.CONSUMER,
            links=links,
            attributes={
                "kickside.job.id": str(job.id),
                "kickside.job.queue": job.queue,
                "kickside.job.worker": job.worker,
                "kickside.job.attempt": job.attempt,
                "kickside.job.max_attempts": job.max_attempts,
            },
        )

    def sync_span(self, call_next: Callable[[Any, Job], Any], args: Any, job: Job) -> Any:
        """Run the sync worker inside its attempt's span."""
        span = self._start(job)
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            try:
                value = call_next(args, job)
            except BaseException as exc:
                _failed(span, exc)
                raise
            span.set_attribute("kickside.job.outcome", outcome_of(value))
            return value

    async def async_span(
        self, call_next: Callable[[Any, Job], Awaitable[Any]], args: Any, job: Job
    ) -> Any:
        """Run the async worker inside its attempt's span."""
        span = self._start(job)
        with trace.use_span(
            span, end_on_exit=True, record_exception=False, set_status_on_exception=False
        ):
            try:
                value = await call_next(args, job)
            except BaseException as exc:
                _failed(span, exc)
                raise
            span.set_attribute("kickside.job.outcome", outcome_of(value))
            return value


def outcome_of(value: Any) -> str:
    """The outcome a worker's return value stands for."""
    if isinstance(value, Snooze):
        return "snooze"
    if isinstance(value, Cancel):
        return "cancel"
    if isinstance(value, Discard):
        return "discard"
    return "done"


def _failed(span: trace.Span, exc: BaseException) -> None:
    # Not span.record_exception: the message and traceback are redacted, as Kickside stores them.
    message = redact_text(str(exc))
    span.set_attribute("kickside.job.outcome", "error")
    span.add_event(
        "exception",
        {
            "exception.type": type(exc).__qualname__,
            "exception.message": message,
            "exception.stacktrace": redact_text("".join(traceback.format_exception(exc))),
        },
    )
    span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {message}"))


__all__ = ["TRACEPARENT", "TRACESTATE", "enqueue_span_context", "instrument", "trace_context"]
