"""Processes for the cross-process wake-up tests: a pool host and an enqueuer.

``python -m tests.support.wake_procs pool URL [--schema S] --poll SECONDS [--lease SECONDS]
[--lease-check SECONDS]`` runs a pool (two process executors, :mod:`tests.support.chaos_app`)
whose poll interval is ``SECONDS``, prints ``ready`` once its executors have loaded the app, and
stops when its standard input closes. ``--lease`` is the lease its claims take (renewed every
third of it); ``--lease-check`` how often it checks that its running jobs still hold their
leases (the fallback that notices an operator's cancel; 1 s in Kickside). The pool runs on a
thread, as an embedding application runs one: SIGHUP keeps its default action (it ends the
process), so only a datagram or a notification can reload this pool.

``python -m tests.support.wake_procs enqueue URL [--schema S] --log PATH --count N
--interval-ms MS`` inserts ``N`` ``chaos`` jobs one commit at a time, ``MS`` apart, and prints
one line per job: its id and the ``CLOCK_MONOTONIC`` nanoseconds just before its insert.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from datetime import timedelta

from kickside_engine import Database, JobBuilder
from kickside_engine.runtime import PoolConfig, WorkerPool, supervision


def run_pool(db: Database, poll_seconds: float, lease_seconds: float, check_seconds: float) -> None:
    supervision.CHECK_INTERVAL_SECONDS = check_seconds
    config = PoolConfig(
        queues={"default": 2},
        app="tests.support.chaos_app",
        poll_interval=poll_seconds,
        lease=timedelta(seconds=lease_seconds),
    )
    pool = WorkerPool(db, config)
    thread = threading.Thread(target=pool.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not (len(pool.executors) >= 2 and all(ex.ready for ex in pool.executors)):
        if not thread.is_alive() or time.monotonic() > deadline:
            raise SystemExit("the pool did not start")
        time.sleep(0.02)
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes our standard input
    pool.request_stop()
    thread.join(30)


def enqueue(db: Database, log: str, count: int, interval_ms: int) -> None:
    origin = time.monotonic()
    for i in range(count):
        before = time.monotonic_ns()
        inserted = JobBuilder("chaos", {"log": log}).insert(db)
        print(inserted.id, before, flush=True)
        pause = origin + (i + 1) * interval_ms / 1000 - time.monotonic()
        if pause > 0:
            time.sleep(pause)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.wake_procs")
    parser.add_argument("role", choices=("pool", "enqueue"))
    parser.add_argument("url")
    parser.add_argument("--schema", default=None)
    parser.add_argument("--poll", type=float, default=1.0)
    parser.add_argument("--lease", type=float, default=30.0)
    parser.add_argument("--lease-check", type=float, default=supervision.CHECK_INTERVAL_SECONDS)
    parser.add_argument("--log", default="")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--interval-ms", type=int, default=50)
    args = parser.parse_args(argv)
    db = Database.from_url(args.url, schema=args.schema)
    try:
        if args.role == "pool":
            run_pool(db, args.poll, args.lease, args.lease_check)
        else:
            enqueue(db, args.log, args.count, args.interval_ms)
    finally:
        db.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
