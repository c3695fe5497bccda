"""Enqueue in a request's span; the job fails once and is retried: two spans, both children
of the request's span and linked to it, told apart by their attempt."""

from __future__ import annotations

from opentelemetry import trace
from traced import charge, registry, spans

from kickside_engine import connect_database, get_job, migrate
from kickside_engine.testing import drain_jobs


def main() -> None:
    db = connect_database()
    migrate.upgrade(db)

    tracer = trace.get_tracer("shop")
    with tracer.start_as_current_span("POST /orders") as request:
        inserted = charge.new({"order": 42}).insert(db)  # type: ignore[attr-defined]
    job = get_job(db, inserted.id)
    assert job is not None
    print("meta:", job.meta)  # {'traceparent': '00-<trace id>-<span id>-..'}

    drain_jobs(db, registry, with_scheduled=True)  # the first attempt fails, the retry runs
    enqueuing = request.get_span_context()
    attempts = [s for s in spans.get_finished_spans() if s.name == "kickside.job charge"]
    assert [s.attributes["kickside.job.attempt"] for s in attempts] == [1, 2]  # type: ignore[index]
    for span in attempts:
        assert span.parent is not None and span.parent.span_id == enqueuing.span_id
        assert span.links[0].context.span_id == enqueuing.span_id
        outcome = span.attributes["kickside.job.outcome"]  # type: ignore[index]
        print(span.name, dict(span.attributes or {}), span.status.status_code.name, outcome)
    assert attempts[0].status.status_code is trace.StatusCode.ERROR


if __name__ == "__main__":
    main()
