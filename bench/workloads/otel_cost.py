"""Workload 22: what OpenTelemetry tracing costs per job (issue 22).

Drains of 20,000 no-op jobs by a pool process at concurrency 10, alternately with the plain
app and with :mod:`bench.workloads.traced_app` (the same workers, instrumented, spans batched
to an exporter that drops them), 3 rounds each so noise and drift fall on both. Each drain
records its jobs/s and the CPU seconds of the pool process and its executors per 1,000 jobs;
the cost per job is the difference of the two medians. Beside it, in this process, 2,000
single enqueues inside a span through an instrumented registry's builder (which writes the
``traceparent``) against as many through a plain one.
"""

from __future__ import annotations

import time

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from bench.targets import reset
from bench.workloads.common import (
    Context,
    Measurement,
    median,
    wait_completed,
)
from bench.workloads.pools import CONCURRENCY, PoolProcess
from kickside_engine import Database, JobBuilder, WorkerRegistry, enqueue_many
from kickside_engine.telemetry.otel import instrument

DRAIN_JOBS = 20_000
ENQUEUES = 2_000
ROUNDS = 3
TRACED_APP = "bench.workloads.traced_app"
POLL_S = 0.05


def _drain(ctx: Context, db: Database, app: str, n: int) -> dict[str, float]:
    with PoolProcess(
        ctx.target, log=ctx.workdir / f"pool-otel-{ctx.target.backend}.log", app=app
    ) as pool:
        reset(db)
        enqueue_many(db, [JobBuilder("noop", {}) for _ in range(n)])
        cpu_before = pool.cpu_seconds()
        started = time.monotonic()
        finished = wait_completed(db, n, poll_seconds=POLL_S)
        cpu = pool.cpu_seconds() - cpu_before
    return {"jobs_per_s": n / (finished - started), "cpu_us_per_job": cpu / n * 1e6}


def _enqueue_us(db: Database, registry: WorkerRegistry, n: int) -> float:
    """Microseconds per single enqueue of ``registry``'s ``noop``, each inside a span."""
    worker = registry.get("noop")
    assert worker is not None
    tracer = trace.get_tracer("bench")
    started = time.perf_counter()
    for _ in range(n):
        with tracer.start_as_current_span("request"):
            worker.new({}).insert(db)
    return (time.perf_counter() - started) / n * 1e6


def otel_cost(ctx: Context) -> Measurement:
    """Plain against traced: drains (pool CPU per job) and single enqueues, alternately."""
    n = ctx.count(DRAIN_JOBS)
    enqueues = ctx.count(ENQUEUES)
    rounds = ROUNDS if ctx.scale >= 1 else 1  # a quick run checks that both ways run
    db = ctx.target.open()
    plain_runs: list[dict[str, float]] = []
    traced_runs: list[dict[str, float]] = []
    enqueue_plain: list[float] = []
    enqueue_traced: list[float] = []
    trace.set_tracer_provider(TracerProvider())  # spans recorded, exported nowhere
    plain, traced = WorkerRegistry(), WorkerRegistry()
    for registry in (plain, traced):
        registry.worker("noop")(lambda args, job: None)
    instrument(traced)
    try:
        for round_ in range(rounds):
            ctx.progress(f"otel_cost: round {round_ + 1}/{rounds}, {n} jobs each way")
            plain_runs.append(_drain(ctx, db, "bench.workloads.app", n))
            traced_runs.append(_drain(ctx, db, TRACED_APP, n))
            reset(db)
            enqueue_plain.append(_enqueue_us(db, plain, enqueues))
            enqueue_traced.append(_enqueue_us(db, traced, enqueues))
        metrics = {
            "plain_jobs_per_s": median([r["jobs_per_s"] for r in plain_runs]),
            "traced_jobs_per_s": median([r["jobs_per_s"] for r in traced_runs]),
            "plain_cpu_us_per_job": median([r["cpu_us_per_job"] for r in plain_runs]),
            "traced_cpu_us_per_job": median([r["cpu_us_per_job"] for r in traced_runs]),
            "plain_enqueue_us": median(enqueue_plain),
            "traced_enqueue_us": median(enqueue_traced),
        }
        metrics["tracing_cpu_us_per_job"] = (
            metrics["traced_cpu_us_per_job"] - metrics["plain_cpu_us_per_job"]
        )
        metrics["tracing_enqueue_us"] = metrics["traced_enqueue_us"] - metrics["plain_enqueue_us"]
        return Measurement(
            workload="otel_cost",
            backend=ctx.target.backend,
            params={"jobs": n, "enqueues": enqueues, "rounds": rounds, "concurrency": CONCURRENCY},
            metrics=metrics,
            runs=[
                {
                    **{f"plain_{k}": v for k, v in p.items()},
                    **{f"traced_{k}": v for k, v in t.items()},
                }
                for p, t in zip(plain_runs, traced_runs, strict=True)
            ],
            details={
                "exporter": "BatchSpanProcessor to an exporter that drops the spans",
                "enqueue_plain_us_rounds": enqueue_plain,
                "enqueue_traced_us_rounds": enqueue_traced,
            },
        )
    finally:
        db.dispose()
