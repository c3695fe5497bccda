"""Huey, the SQLite peer (issue 26), through its documented API: ``SqliteHuey``, task calls,
``TaskWrapper.map`` and its own consumer (10 workers, process or thread).

Runs inside ``bench/.peers-venv``. One ``run`` of this module measures one durability mode:

- ``FULL``: Huey's default (``SqliteHuey`` in WAL mode leaves ``synchronous`` at SQLite's
  default, FULL: every commit is fsynced);
- ``NORMAL``: Kickside's SQLite default (WAL, ``synchronous=NORMAL``: the WAL is fsynced at
  checkpoints only), set on every connection Huey opens.

The Huey instance is built from environment variables at import (the database file, the
mode and the completion log), so the consumer's worker processes build the same one. Huey
keeps no record of a finished task (a no-op's ``None`` result is not stored), so completions
are counted through its ``SIGNAL_COMPLETE`` signal: the handler appends one byte per finished
task to a file, and the harness reads its size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.peers import protocol
from bench.peers.sqlite_trace import COUNTED_WITH, FSYNCS, StatementTrace, indexes_by_table

MODULE = "bench.peers.huey_peer"
DB_ENV = "KICKSIDE_BENCH_HUEY_DB"
SYNC_ENV = "KICKSIDE_BENCH_HUEY_SYNCHRONOUS"
DONE_ENV = "KICKSIDE_BENCH_HUEY_DONE"
MODES = {"FULL": "huey", "NORMAL": "huey-normal"}
WORKER_TYPES = ("process", "thread")
#: A drain stops waiting once the queue is empty and nothing completed for this long.
LOST_AFTER_S = 5.0


def _make_huey() -> Any:
    from huey import SqliteHuey  # type: ignore[import-not-found]
    from huey.storage import SqliteStorage  # type: ignore[import-not-found]

    mode = os.environ.get(SYNC_ENV, "FULL").upper()

    class NormalStorage(SqliteStorage):  # type: ignore[misc]
        """SqliteStorage with ``synchronous=NORMAL`` on every connection (Huey's ``fsync``
        option knows only FULL and OFF)."""

        def _create_connection(self) -> Any:
            conn = super()._create_connection()
            conn.execute("pragma synchronous=NORMAL")
            return conn

    class NormalHuey(SqliteHuey):  # type: ignore[misc]
        storage_class = NormalStorage

    cls = NormalHuey if mode == "NORMAL" else SqliteHuey
    return cls("bench", filename=os.environ.get(DB_ENV, "huey-bench.db"))


huey = _make_huey()


@huey.task(name="noop")  # type: ignore[untyped-decorator]
def noop() -> None:
    """Nothing."""


@huey.task(context=True, name="stamp")  # type: ignore[untyped-decorator]
def stamp(log: str, task: Any = None) -> None:
    """Record when this body began."""
    protocol.write_stamp(log, task.id)


def _on_complete(signal: str, task: Any, *args: Any) -> None:
    done = os.environ.get(DONE_ENV)
    if done:
        fd = os.open(done, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)


def _connect_signal() -> None:
    from huey.signals import SIGNAL_COMPLETE  # type: ignore[import-not-found]

    huey.signal(SIGNAL_COMPLETE)(_on_complete)


_connect_signal()


class HueyPeer:
    """Huey on one SQLite file (this process enqueues; the consumer runs elsewhere)."""

    module = MODULE

    def __init__(self, name: str) -> None:
        self.name = name
        self.version = metadata.version("huey")
        self.done = Path(os.environ[DONE_ENV])
        self.done.touch()

    def reset(self) -> None:
        huey.flush()
        self.done.write_bytes(b"")

    def bulk_enqueue(self, n: int, task: str = "noop", args: dict[str, Any] | None = None) -> None:
        # Huey has no batch insert: map() is its documented call for many tasks at once.
        noop.map([() for _ in range(n)])

    def preload(self, n: int) -> None:
        """``n`` no-op tasks made visible at once: serialized as ``TaskWrapper.map`` would
        (``huey.serialize_task``), inserted into Huey's task table in one transaction of its
        storage. ``map`` commits each task as it goes, so a running consumer would start
        draining before the last one was queued and a drain clock started after ``map``
        would miss that work; Kickside's drain, too, times from one commit of every job."""
        rows = [
            (huey.storage.name, huey.storage.to_blob(huey.serialize_task(noop.s())), 0)
            for _ in range(n)
        ]
        with huey.storage.db(commit=True) as curs:
            curs.executemany("insert into task (queue, data, priority) values (?, ?, ?)", rows)

    def backend_pid(self) -> int:
        return 0

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        result = stamp(args["log"]) if task == "stamp" else noop()
        return str(result.id)

    def completed(self) -> int:
        return self.done.stat().st_size

    def insert_history(self, size: int) -> None:
        raise NotImplementedError("Huey keeps no history of finished tasks")

    def claim_and_complete(self, n: int) -> float:
        raise NotImplementedError("history_scale is not run against Huey")

    def mode(self) -> str:
        row = huey.storage.sql("pragma synchronous", results=True)
        return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(int(row[0][0]), "?")

    def close(self) -> None:
        huey.storage.close()


def wait_for_completions(peer: HueyPeer, n: int, *, timeout_seconds: float) -> tuple[int, float]:
    """Wait until ``n`` tasks completed, or until the queue is empty and no task has completed
    for :data:`LOST_AFTER_S` (a task Huey dequeued and then failed to run, as when its
    revoke check meets a locked database, is gone: its dequeue already deleted it).

    Returns the tasks completed and the monotonic time of the last completion seen.
    """
    deadline = time.monotonic() + timeout_seconds
    done, last = peer.completed(), time.monotonic()
    while done < n:
        time.sleep(protocol.POLL_S)
        now, seen = time.monotonic(), peer.completed()
        if seen != done:
            done, last = seen, now
        elif now - last > LOST_AFTER_S and huey.pending_count() == 0:
            break
        if now > deadline:
            raise TimeoutError(f"timed out after {timeout_seconds:.0f}s waiting for completions")
    return done, last


def drain(peer: HueyPeer, n: int, workdir: Path) -> dict[str, Any]:
    """Workload 3 for each worker type: from the commit of ``n`` tasks
    (:meth:`HueyPeer.preload`) until they completed, median of 3, with the consumer's CPU (its
    process tree) per 1,000 jobs, and the tasks that never completed (``lost_jobs``, summed
    over the runs)."""
    from bench.cpu import process_tree_cpu_seconds

    metrics: dict[str, float] = {}
    runs: list[dict[str, float]] = []
    for kind in WORKER_TYPES:
        worker = protocol.WorkerProcess(
            MODULE, ["--worker-type", kind], workdir / f"peer-{peer.name}.log"
        )
        mine = []
        with worker:
            assert worker.proc is not None
            for _ in range(protocol.REPEATS):
                peer.reset()
                cpu_before = process_tree_cpu_seconds(worker.proc.pid)
                peer.preload(n)
                started = time.monotonic()
                done, finished = wait_for_completions(peer, n, timeout_seconds=max(120.0, n / 20))
                cpu = process_tree_cpu_seconds(worker.proc.pid) - cpu_before
                mine.append(
                    {
                        "seconds": finished - started,
                        "jobs_per_s": done / (finished - started),
                        "pool_cpu_s_per_1000_jobs": cpu / max(done, 1) * 1000,
                        "lost_jobs": n - done,
                    }
                )
        runs += [{**r, "threads": float(kind == "thread")} for r in mine]
        prefix = "" if kind == "process" else "thread_"
        for key in ("jobs_per_s", "pool_cpu_s_per_1000_jobs"):
            metrics[prefix + key] = statistics.median(r[key] for r in mine)
        metrics[prefix + "lost_jobs"] = sum(r["lost_jobs"] for r in mine)
    return protocol.result(
        peer,
        "drain",
        params={"jobs": n, "repeats": protocol.REPEATS, "concurrency": protocol.CONCURRENCY},
        metrics=metrics,
        runs=runs,
        details={"completion_poll_s": protocol.POLL_S, "worker_types": list(WORKER_TYPES)},
    )


def work_per_job(peer: HueyPeer, n: int) -> dict[str, Any]:
    """Issue 26's work per job, counted as ``bench.workloads.work_per_job`` counts Kickside's
    (:class:`~bench.peers.sqlite_trace.StatementTrace` on Huey's connection): ``n`` task calls
    (enqueue), then in this process ``huey.dequeue()`` (claim) and ``huey.execute(task)``
    (settle: its revoke check and result, with the body) until the queue is empty."""
    peer.reset()
    conn = huey.storage.conn
    trace = StatementTrace()

    def measured(name: str, call: Any) -> Any:
        trace.phase = name
        before = conn.total_changes
        try:
            return call()
        finally:
            trace.add_rows(name, conn.total_changes - before)
            trace.phase = ""

    trace.attach(conn)
    done = 0
    try:
        for _ in range(n):
            measured("enqueue", noop)
        while (task := measured("claim", huey.dequeue)) is not None:
            measured("settle", lambda t=task: huey.execute(t))
            done += 1
    finally:
        trace.detach(conn)
    if done != n:
        raise RuntimeError(f"ran {done} tasks, expected {n}")
    indexes = huey.storage.sql(
        "select tbl_name, name from sqlite_master where type = 'index' order by 1, 2",
        results=True,
    )
    return protocol.result(
        peer,
        "work_per_job",
        params={"jobs": n, "claim_batch": 1},
        metrics=trace.metrics(n),
        details={
            "counted_with": COUNTED_WITH,
            "indexes": indexes_by_table(indexes),
            "statements": trace.statements(),
            "fsyncs": FSYNCS,
        },
    )


def run(name: str, counts: dict[str, int], workdir: Path) -> list[dict[str, Any]]:
    """Run ``counts`` (workload: jobs) against Huey in this process's mode: result entries."""
    peer = HueyPeer(name)
    log = workdir / f"peer-{name}.log"
    runners = {
        "bulk_enqueue": lambda n: protocol.bulk_enqueue(peer, n),
        "single_enqueue": lambda n: protocol.single_enqueue(peer, n),
        "drain": lambda n: drain(peer, n, workdir),
        "work_per_job": lambda n: work_per_job(peer, n),
        "latency": lambda n: protocol.latency(
            peer,
            protocol.WorkerProcess(MODULE, ["--worker-type", "process"], log),
            n,
            workdir / f"latency-{name}.stamps",
        ),
    }
    results = []
    try:
        mode = peer.mode()
        for workload, n in counts.items():
            if workload not in runners:
                continue
            print(f"[{name}] {workload}: {n} jobs", file=sys.stderr, flush=True)
            try:
                entry = runners[workload](n)
            except Exception as exc:
                entry = protocol.result(peer, workload, params={"jobs": n}, metrics={})
                entry["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            entry["backend"] = "sqlite"
            entry["details"].update(synchronous=mode, journal_mode="wal", workers=10)
            results.append(entry)
    finally:
        peer.close()
    return results


def _work(worker_type: str) -> None:
    consumer = huey.create_consumer(workers=protocol.CONCURRENCY, worker_type=worker_type)
    print("ready", flush=True)
    consumer.run()


def main(argv: list[str] | None = None) -> int:
    """``run --workdir DIR --count W=N ...`` (the env names the mode and the file): print the
    results as JSON; ``worker --worker-type process|thread``: run Huey's consumer."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("command", choices=["run", "worker"])
    parser.add_argument("--worker-type", choices=WORKER_TYPES, default="process")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--count", action="append", default=[], metavar="WORKLOAD=N")
    args = parser.parse_args(argv)
    if args.command == "worker":
        _work(args.worker_type)
        return 0
    counts = {k: int(v) for k, _, v in (c.partition("=") for c in args.count)}
    name = MODES[os.environ.get(SYNC_ENV, "FULL").upper()]
    results = run(name, counts, args.workdir)
    print(json.dumps({"system": name, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
