"""A worker pool in a process of its own, as a deployment runs it: ``python -m
bench.workloads.poolhost --database-url URL [--schema S] [--concurrency 10]
[--app MODULE] [--async-slots N]``.

It prints ``ready`` once every executor has loaded the app (so no measurement pays for
process start-up), runs until its standard input closes or it gets SIGTERM, then stops the pool
gracefully and prints one JSON line: the pool's outcome counts and the CPU seconds used by the
pool and its executors.
"""

from __future__ import annotations

import argparse
import json
import resource
import signal
import sys
import threading
import time
from collections.abc import Callable

from kickside_engine import Database
from kickside_engine.runtime import PoolConfig, WorkerPool

APP = "bench.workloads.app"
READY_TIMEOUT_S = 180.0


def executors_ready(pool: WorkerPool) -> bool:
    """Whether the pool has all its executors and each has loaded the app."""
    executors = list(pool.executors)
    wanted = max(1, pool.config.executors + (pool.config.async_executors or 0))
    return len(executors) >= wanted and all(ex.ready for ex in executors)


def wait_ready(
    pool: WorkerPool, *, alive: Callable[[], bool], timeout_seconds: float = READY_TIMEOUT_S
) -> None:
    """Wait until :func:`executors_ready`; raise ``TimeoutError`` after ``timeout_seconds``.

    ``alive`` tells whether the pool's thread still runs: a pool that died while starting
    fails at once instead of after the timeout.
    """
    deadline = time.monotonic() + timeout_seconds
    while not executors_ready(pool):
        if not alive():
            raise RuntimeError("the pool stopped while starting (see its log)")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the pool's executors were not ready after {timeout_seconds:.0f}s")
        time.sleep(0.02)


def pool_config(queue: str, concurrency: int, app: str, async_slots: int | None) -> PoolConfig:
    """The pool's configuration: process executors (one per unit of concurrency), or with
    ``async_slots`` one async executor running that many ``async def`` jobs at once."""
    if async_slots is None:
        return PoolConfig(queues={queue: concurrency}, app=app)
    return PoolConfig(
        queues={queue: concurrency},
        app=app,
        process_executors=0,
        async_executors=1,
        async_slots=async_slots,
    )


def cpu_seconds() -> float:
    """User plus system CPU seconds of this process and its reaped children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def main(argv: list[str] | None = None) -> int:
    """Run one pool until told to stop; see the module docstring for the protocol."""
    parser = argparse.ArgumentParser(prog="python -m bench.workloads.poolhost")
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--schema", default=None)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--queue", default="default")
    parser.add_argument("--app", default=APP)
    parser.add_argument(
        "--async-slots",
        type=int,
        default=None,
        help="run one async executor with this many slots, and no process executor",
    )
    args = parser.parse_args(argv)

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    db = Database.from_url(args.database_url, schema=args.schema)
    pool = WorkerPool(db, pool_config(args.queue, args.concurrency, args.app, args.async_slots))
    thread = threading.Thread(target=pool.run, name="bench-pool", daemon=True)
    thread.start()
    try:
        wait_ready(pool, alive=thread.is_alive)
        print("ready", flush=True)

        def watch_stdin() -> None:
            sys.stdin.read()
            stop.set()

        threading.Thread(target=watch_stdin, name="bench-stdin", daemon=True).start()
        stop.wait()
    finally:
        pool.request_stop()
        thread.join(60)
        db.dispose()
    print(json.dumps({"stats": dict(pool.stats), "cpu_s": cpu_seconds()}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
