"""The peers' side of the harness: the same workloads, driven through each peer's own API.

Runs inside ``bench/.peers-venv`` (the peers are never installed beside Kickside), so it uses
the standard library and psycopg only, and writes each result in the shape of
:class:`bench.workloads.common.Measurement`. A peer module provides a :class:`Peer` (enqueue,
count, reset) and a ``worker`` command that runs the peer's worker in a process of its own
until SIGTERM, as Kickside's pool runs for the same workloads.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
CONCURRENCY = 10
REPEATS = 3
SETTLE_S = 1.0
POLL_S = 0.05
INTERVAL_S = 0.020
HISTORY_ROUNDS = 3
#: io_drain: each job sleeps 10 ms, 200 at once; Little's law bounds it at 20,000 jobs/s.
IO_SECONDS = 0.01
IO_SLOTS = 200
IO_LIMIT_JOBS_PER_S = IO_SLOTS / IO_SECONDS


class Peer(Protocol):
    """One peer system, opened on its own schema."""

    name: str
    version: str
    module: str

    def reset(self) -> None:
        """Delete every job (queued and finished)."""

    def bulk_enqueue(self, n: int, task: str = "noop", args: dict[str, Any] | None = None) -> None:
        """Enqueue ``n`` jobs of ``task`` (each with ``args``) through the peer's batch API."""

    def backend_pid(self) -> int:
        """The server process of the peer's own connection (to find the server's CPU)."""

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        """Enqueue one job in its own commit; returns the job's id as text."""

    def completed(self) -> int:
        """How many jobs finished successfully."""

    def insert_history(self, size: int) -> None:
        """Add ``size`` finished jobs to history, as the peer keeps them (fast, in SQL)."""

    def claim_and_complete(self, n: int) -> float:
        """Enqueue ``n`` jobs, then claim and complete them all with the peer's own calls.

        Returns the seconds spent claiming and completing (not enqueueing).
        """

    def close(self) -> None:
        """Close the peer's connections."""


def percentile(values: list[float], pct: float) -> float:
    """The ``pct`` percentile by linear interpolation (as the Kickside side computes it)."""
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def checkpoint(conninfo: str) -> None:
    """Flush the server's dirty buffers before a workload, as the harness does for Kickside's
    (``bench.targets.checkpoint``): no workload pays for the writes of the one before it."""
    import psycopg

    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.Error as exc:
        print(f"no CHECKPOINT before the workload: {exc}", file=sys.stderr, flush=True)


def result(
    peer: Peer,
    workload: str,
    *,
    params: dict[str, Any],
    metrics: dict[str, float],
    runs: list[dict[str, float]] | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A result entry shaped like Kickside's (floats rounded alike)."""
    return {
        "system": peer.name,
        "backend": "postgresql",
        "workload": workload,
        "params": params,
        "metrics": {k: _round(v) for k, v in metrics.items()},
        "runs": [{k: _round(v) for k, v in run.items()} for run in runs or []],
        "details": {
            "version": peer.version,
            "python": platform.python_version(),
            **(details or {}),
        },
        "error": None,
    }


def _round(value: float) -> float:
    return round(value, 4) if abs(value) < 100 else round(value, 1)


def wait_until(condition: Callable[[], bool], *, timeout_seconds: float, what: str) -> float:
    """Poll until ``condition`` holds; the monotonic time it was seen (TimeoutError after)."""
    deadline = time.monotonic() + timeout_seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_seconds:.0f}s waiting for {what}")
        time.sleep(POLL_S)
    return time.monotonic()


class WorkerProcess:
    """The peer's worker in a process of its own: ``python -m <module> worker ...``."""

    def __init__(self, module: str, args: list[str], log: Path) -> None:
        self.command = [sys.executable, "-m", module, "worker", *args]
        self.log = log
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> WorkerProcess:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(self.log, "a") as err:
            self.proc = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,
            )
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        line = self.proc.stdout.readline() if ready else ""
        if line.strip() != "ready":
            self.stop()
            raise RuntimeError(f"the worker did not start (see {self.log})")
        time.sleep(SETTLE_S)  # the worker listens and has run its first fetch
        return self

    def stop(self) -> None:
        """SIGTERM (each peer's graceful stop), then SIGKILL after 60 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __exit__(self, *exc: object) -> None:
        self.stop()


def worker_main(
    module: str,
    work: Callable[[str, str, int], Coroutine[Any, Any, None]],
    argv: list[str] | None = None,
    *,
    default_concurrency: int | None = CONCURRENCY,
) -> int:
    """A peer module's ``main``: ``worker --conninfo DSN --schema S [--concurrency N]`` runs
    ``work(conninfo, schema, concurrency)`` (the peer's worker, until SIGTERM); a peer with
    ``default_concurrency=None`` gets ``None`` (its own default) when none is given."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("--conninfo", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--concurrency", type=int, default=default_concurrency)
    args = parser.parse_args(argv)
    asyncio.run(work(args.conninfo, args.schema, args.concurrency))
    return 0


def bulk_enqueue(peer: Peer, n: int) -> dict[str, Any]:
    """Workload 1: the peer's batch enqueue of ``n`` jobs, median of 3."""
    runs = []
    for _ in range(REPEATS):
        peer.reset()
        started = time.perf_counter()
        peer.bulk_enqueue(n)
        seconds = time.perf_counter() - started
        runs.append({"seconds": seconds, "jobs_per_s": n / seconds})
    rate = statistics.median(r["jobs_per_s"] for r in runs)
    return result(
        peer,
        "bulk_enqueue",
        params={"jobs": n, "repeats": REPEATS},
        metrics={"jobs_per_s": rate},
        runs=runs,
    )


def single_enqueue(peer: Peer, n: int) -> dict[str, Any]:
    """Workload 2: ``n`` single enqueues, one commit each."""
    peer.reset()
    calls = []
    started = time.perf_counter()
    for _ in range(n):
        before = time.perf_counter()
        peer.enqueue_one("noop", {})
        calls.append((time.perf_counter() - before) * 1000)
    seconds = time.perf_counter() - started
    return result(
        peer,
        "single_enqueue",
        params={"jobs": n},
        metrics={
            "jobs_per_s": n / seconds,
            "call_p50_ms": percentile(calls, 50),
            "call_p99_ms": percentile(calls, 99),
        },
        runs=[{"seconds": seconds, "jobs_per_s": n / seconds}],
    )


def drain(peer: Peer, worker: WorkerProcess, n: int) -> dict[str, Any]:
    """Workload 3: from the bulk insert's commit until ``n`` jobs completed, median of 3."""
    runs = []
    with worker:
        for _ in range(REPEATS):
            peer.reset()
            peer.bulk_enqueue(n)
            started = time.monotonic()
            finished = wait_until(
                lambda: peer.completed() >= n,
                timeout_seconds=max(120.0, n / 20),
                what="completions",
            )
            runs.append({"seconds": finished - started, "jobs_per_s": n / (finished - started)})
    return result(
        peer,
        "drain",
        params={"jobs": n, "repeats": REPEATS, "concurrency": CONCURRENCY, "pools": 1},
        metrics={"jobs_per_s": statistics.median(r["jobs_per_s"] for r in runs)},
        runs=runs,
        details={"completion_poll_s": POLL_S},
    )


def latency(
    peer: Peer, worker: WorkerProcess, n: int, stamps: Path, workload: str = "latency"
) -> dict[str, Any]:
    """Workload 4 (and ``async_latency``, the same with the peer's async worker, which every
    peer's worker is): enqueue-to-start, one job every 20 ms, on an idle worker."""
    stamps.unlink(missing_ok=True)
    peer.reset()
    sent: dict[str, tuple[int, int]] = {}
    with worker:
        origin = time.monotonic()
        for i in range(n):
            before = time.monotonic_ns()
            job_id = peer.enqueue_one("stamp", {"log": str(stamps)})
            sent[job_id] = (before, time.monotonic_ns())
            pause = origin + (i + 1) * INTERVAL_S - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        wait_until(lambda: len(read_stamps(stamps)) >= n, timeout_seconds=60, what="started jobs")
    first: dict[str, int] = {}
    for job_id, mono_ns in read_stamps(stamps):
        first.setdefault(job_id, mono_ns)
    from_call = [(first[j] - sent[j][0]) / 1e6 for j in sent if j in first]
    from_commit = [(first[j] - sent[j][1]) / 1e6 for j in sent if j in first]
    return result(
        peer,
        workload,
        params={"jobs": n, "interval_ms": INTERVAL_S * 1000, "concurrency": CONCURRENCY},
        metrics={
            "p50_ms": percentile(from_call, 50),
            "p99_ms": percentile(from_call, 99),
            "mean_ms": sum(from_call) / len(from_call),
            "max_ms": max(from_call),
            "commit_p50_ms": percentile(from_commit, 50),
            "commit_p99_ms": percentile(from_commit, 99),
        },
        details={"started": len(from_call), "placement": "separate process"},
    )


def async_drain(
    peer: Peer,
    worker: WorkerProcess,
    n: int,
    *,
    workload: str,
    task: str,
    args: dict[str, Any] | None,
    concurrency: int,
    backend_pid: int,
) -> dict[str, Any]:
    """Issue 21's async drains (``async_drain``: no-op jobs at concurrency 10; ``io_drain``:
    10 ms sleeps at 200): from the bulk insert's commit until ``n`` jobs completed, median of
    3, with the CPU per 1,000 jobs of the worker's process tree plus PostgreSQL's, as
    Kickside's (``bench.workloads.async_drains``)."""
    from bench.cpu import PostgresCpu, cpu_per_1000_jobs, process_tree_cpu_seconds

    pg = PostgresCpu.from_backend(backend_pid)
    runs = []
    with worker:
        assert worker.proc is not None
        for _ in range(REPEATS):
            peer.reset()
            peer.bulk_enqueue(n, task, args)
            cpu_before, pg_before = process_tree_cpu_seconds(worker.proc.pid), pg.seconds()
            started = time.monotonic()
            finished = wait_until(
                lambda: peer.completed() >= n,
                timeout_seconds=max(120.0, n / 20),
                what="completions",
            )
            cpu = process_tree_cpu_seconds(worker.proc.pid) - cpu_before
            pg_after = pg.seconds()
            runs.append(
                {
                    "seconds": finished - started,
                    "jobs_per_s": n / (finished - started),
                    **cpu_per_1000_jobs(n, cpu, pg_before, pg_after),
                }
            )
    names = [k for k in runs[0] if k != "seconds" and all(k in r for r in runs)]
    metrics = {k: statistics.median(r[k] for r in runs) for k in names}
    params: dict[str, Any] = {
        "jobs": n,
        "repeats": REPEATS,
        "concurrency": concurrency,
        "pools": 1,
    }
    if workload == "io_drain":
        metrics["limit_fraction"] = metrics["jobs_per_s"] / IO_LIMIT_JOBS_PER_S
        params.update(job_seconds=IO_SECONDS, limit_jobs_per_s=IO_LIMIT_JOBS_PER_S)
    return result(
        peer,
        workload,
        params=params,
        metrics=metrics,
        runs=runs,
        details={
            "completion_poll_s": POLL_S,
            "postgresql_cpu": "measured" if pg.reason is None else f"n/a: {pg.reason}",
        },
    )


def history_scale(peer: Peer, n: int, sizes: dict[str, int], conninfo: str) -> dict[str, Any]:
    """Workload 5: claim-and-complete cost with a small and a large history, as Kickside's
    (a checkpoint between generating the history and measuring)."""
    runs: list[dict[str, float]] = []
    per_job: dict[str, float] = {}
    for label, size in sizes.items():
        peer.reset()
        began = time.perf_counter()
        peer.insert_history(size)
        generated = time.perf_counter() - began
        checkpoint(conninfo)
        costs = []
        for _ in range(HISTORY_ROUNDS):
            costs.append(peer.claim_and_complete(n) / n * 1e6)
            runs.append({"history": size, "us_per_job": costs[-1]})
        per_job[label] = statistics.median(costs)
        runs.append({"history": size, "generate_s": generated})
    peer.reset()
    return result(
        peer,
        "history_scale",
        params={"jobs": n, "rounds": HISTORY_ROUNDS, "history": sizes},
        metrics={
            "small_us_per_job": per_job["small"],
            "large_us_per_job": per_job["large"],
            "slowdown": per_job["large"] / per_job["small"],
        },
        runs=runs,
    )


def read_stamps(path: Path) -> list[tuple[str, int]]:
    """``(job_id, start_monotonic_ns)`` per execution written by a peer's ``stamp`` task."""
    if not path.exists():
        return []
    stamps = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            stamps.append((parts[0], int(parts[1])))
    return stamps


def write_stamp(path: str, job_id: object) -> None:
    """What a peer's ``stamp`` task does first: append ``job_id start_ns wall_ns``."""
    started_ns, wall_ns = time.monotonic_ns(), time.time_ns()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{job_id} {started_ns} {wall_ns}\n".encode())
    finally:
        os.close(fd)
