"""Workload 6 for a peer: 1, 2 and 4 of its worker processes (concurrency 10 each) draining.

The same procedure as Kickside's (:mod:`bench.workloads.multinode`): workers are added one
count after the other, all ready before each clock starts; the jobs are the peer's ``span``
task, logging each execution (:mod:`bench.nodes`; a peer hands its task no claim time, so an
execution's interval is its body alone); CPU is the workers' process trees plus PostgreSQL's.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.cpu import PostgresCpu, cpu_per_1000_jobs, process_tree_cpu_seconds
from bench.nodes import POOL_COUNTS, duplicates, multi_node_metrics, read_spans
from bench.peers.protocol import CONCURRENCY, Peer, WorkerProcess, result, wait_until


def _start(workers: list[WorkerProcess], stack: contextlib.ExitStack) -> None:
    with ThreadPoolExecutor(max_workers=max(1, len(workers))) as starter:
        futures = [starter.submit(w.__enter__) for w in workers]
    errors = []
    for worker, future in zip(workers, futures, strict=True):
        if future.exception() is None:
            stack.push(worker)
        else:
            errors.append(future.exception())
    if errors:
        raise RuntimeError(f"{len(errors)} worker process(es) did not start: {errors[0]}")


def _cpu(workers: list[WorkerProcess]) -> float:
    return sum(process_tree_cpu_seconds(w.proc.pid) for w in workers if w.proc is not None)


def multi_node(
    peer: Peer,
    worker_args: list[str],
    workdir: Path,
    n: int,
    backend_pid: int,
    pool_counts: tuple[int, ...] = POOL_COUNTS,
) -> dict[str, Any]:
    """Jobs/s, CPU per 1,000 jobs and duplicate executions with 1, 2 and 4 worker processes."""
    pg = PostgresCpu.from_backend(backend_pid)
    runs: list[dict[str, float]] = []
    logs: dict[int, Path] = {}
    with contextlib.ExitStack() as stack:
        workers: list[WorkerProcess] = []
        for count in pool_counts:
            added = [
                WorkerProcess(peer.module, worker_args, workdir / f"peer-{peer.name}-{i}.log")
                for i in range(len(workers), count)
            ]
            _start(added, stack)
            workers += added
            logs[count] = workdir / f"multi-{peer.name}-{count}.spans"
            logs[count].unlink(missing_ok=True)
            peer.reset()
            peer.bulk_enqueue(n, "span", {"log": str(logs[count])})
            cpu_before, pg_before = _cpu(workers), pg.seconds()
            started = time.monotonic()
            finished = wait_until(
                lambda: peer.completed() >= n,
                timeout_seconds=max(120.0, n / 20),
                what=f"completions with {count} workers",
            )
            cpu, pg_after = _cpu(workers) - cpu_before, pg.seconds()
            runs.append(
                {
                    "pools": float(count),
                    "seconds": finished - started,
                    "jobs_per_s": n / (finished - started),
                    **cpu_per_1000_jobs(n, cpu, pg_before, pg_after),
                }
            )
    # Every worker has stopped: an execution still under way at the last poll is logged now.
    for run, count in zip(runs, pool_counts, strict=True):
        run.update({k: float(v) for k, v in duplicates(read_spans(logs[count]), n).items()})
    return result(
        peer,
        "multi_node",
        params={"jobs": n, "pool_counts": list(pool_counts), "concurrency": CONCURRENCY},
        metrics=multi_node_metrics(runs),
        runs=runs,
        details={
            "postgresql_cpu": "measured" if pg.reason is None else f"n/a: {pg.reason}",
            "span": "the task's body only (no claim time is handed to the task)",
        },
    )
