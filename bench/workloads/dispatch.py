"""Dispatch cost: how long the supervisor's hand-off to an executor process takes.

One executor process (the pool's own ``ProcessExecutor``, app ``bench.workloads.app``) gets a
claimed no-op job and sends back its result, 2,000 times one after another: the round trip
(pickling, the pipe both ways, the executor running ``execute``) in µs, p50/p99, and the CPU
per hand-off on each side. The database (the run's SQLite file) only serves the one claim
beforehand.
"""

from __future__ import annotations

import resource
import time

from bench.cpu import process_tree_cpu_seconds
from bench.workloads.common import Context, Measurement, percentile
from kickside_engine import JobBuilder, connect_database, migrate
from kickside_engine.api import claim
from kickside_engine.runtime.executors import ProcessExecutor

DISPATCH_ROUNDS = 2_000
APP = "bench.workloads.app"


def dispatch(ctx: Context) -> Measurement:
    """Round trips of one claimed job to an executor process and back."""
    rounds = ctx.count(DISPATCH_ROUNDS, minimum=200)
    db = connect_database(f"sqlite:///{ctx.workdir / 'dispatch.sqlite3'}")
    try:
        migrate.upgrade(db)
        JobBuilder("noop", {}).insert(db)
        (claimed,) = claim(db, queue="default", node="bench-dispatch", limit=1)
    finally:
        db.dispose()
    executor = ProcessExecutor(APP, 0)
    try:
        ready = executor.conn.recv()
        if ready[0] != "ready":
            raise RuntimeError(f"the executor did not load {APP}: {ready!r}")
        for _ in range(50):  # warm up both sides
            executor.dispatch([claimed])
            executor.conn.recv()
        pid = executor.pid
        assert pid is not None
        child_before = process_tree_cpu_seconds(pid)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        parent_before = usage.ru_utime + usage.ru_stime
        trips: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter()
            executor.dispatch([claimed])
            executor.conn.recv()
            trips.append((time.perf_counter() - started) * 1e6)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        parent_cpu = usage.ru_utime + usage.ru_stime - parent_before
        child_cpu = process_tree_cpu_seconds(pid) - child_before
    finally:
        executor.stop()
        executor.join(5)
    return Measurement(
        workload="dispatch",
        backend=ctx.target.backend,
        params={"rounds": rounds},
        metrics={
            "round_trip_p50_us": percentile(trips, 50),
            "round_trip_p99_us": percentile(trips, 99),
            "supervisor_cpu_us": parent_cpu / rounds * 1e6,
            "executor_cpu_us": child_cpu / rounds * 1e6,
            "cpu_us_per_job": (parent_cpu + child_cpu) / rounds * 1e6,
        },
        details={"what": "supervisor → executor process → supervisor, a claimed no-op job"},
    )
