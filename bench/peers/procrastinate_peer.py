"""procrastinate, through its documented API: ``batch_defer``, ``defer`` and an async worker.

Its schema lives in the run's own PostgreSQL schema (every connection's ``search_path``). The
worker is procrastinate's own, with its defaults (LISTEN/NOTIFY on, polling as fallback) and
``concurrency=10``; SIGTERM is its graceful stop.
"""

from __future__ import annotations

import asyncio
import sys
import time
from importlib import metadata
from typing import Any

import psycopg
from procrastinate import App, PsycopgConnector  # type: ignore[import-not-found]
from procrastinate.jobs import Status  # type: ignore[import-not-found]

from bench.nodes import write_span
from bench.peers import protocol

MODULE = "bench.peers.procrastinate_peer"

# History as procrastinate keeps it: succeeded jobs stay in procrastinate_jobs (its default
# worker never deletes them), each with its three events, spread over the last six days.
_HISTORY_JOBS_SQL = """
INSERT INTO procrastinate_jobs (queue_name, task_name, args, status, attempts)
SELECT 'default', 'noop', '{}', 'succeeded', 1 FROM generate_series(1, %(n)s)
"""
_HISTORY_EVENTS_SQL = """
INSERT INTO procrastinate_events (job_id, type, at)
SELECT j.id, e.type::procrastinate_job_event_type,
    now() - interval '6 days' + j.id * interval '6 days' / %(n)s + e.offset_ms * interval '1 ms'
FROM procrastinate_jobs AS j
CROSS JOIN (VALUES ('deferred', 0), ('started', 5), ('succeeded', 6)) AS e(type, offset_ms)
"""


async def noop() -> None:
    """Nothing."""


async def io(seconds: float) -> None:
    """Wait as an I/O call would (io_drain)."""
    await asyncio.sleep(seconds)


async def stamp(context: Any, log: str) -> None:
    """Record when this body began."""
    protocol.write_stamp(log, context.job.id)


async def span(context: Any, log: str) -> None:
    """Log this execution (workload 6)."""
    write_span(log, context.job.id, context.job.attempts)


def make_app(conninfo: str, schema: str) -> Any:
    """An App on ``schema``, with the benchmark's two tasks."""
    connector = PsycopgConnector(conninfo=conninfo, kwargs={"options": f"-c search_path={schema}"})
    app = App(connector=connector)
    app.task(name="noop")(noop)
    app.task(name="stamp", pass_context=True)(stamp)
    app.task(name="span", pass_context=True)(span)
    app.task(name="io")(io)
    return app


class ProcrastinatePeer:
    """procrastinate on one schema, opened synchronously for enqueueing."""

    name = "procrastinate"
    module = MODULE

    def __init__(self, conninfo: str, schema: str) -> None:
        self.version = metadata.version("procrastinate")
        self.conninfo, self.schema = conninfo, schema
        self.conn = psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")
        self.app = make_app(conninfo, schema)
        self.app.open()
        self.app.schema_manager.apply_schema()

    def reset(self) -> None:
        self.conn.execute("TRUNCATE procrastinate_jobs CASCADE")

    def bulk_enqueue(self, n: int, task: str = "noop", args: dict[str, Any] | None = None) -> None:
        self.app.tasks[task].batch_defer(*(dict(args or {}) for _ in range(n)))

    def backend_pid(self) -> int:
        return int(self.conn.info.backend_pid)

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        return str(self.app.tasks[task].defer(**args))

    def completed(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        ).fetchone()
        return int(row[0]) if row else 0

    def insert_history(self, size: int) -> None:
        with self.conn.transaction():
            self.conn.execute(_HISTORY_JOBS_SQL, {"n": size})
            self.conn.execute(_HISTORY_EVENTS_SQL, {"n": size})
        self.conn.execute("ANALYZE procrastinate_jobs")
        self.conn.execute("ANALYZE procrastinate_events")

    def claim_and_complete(self, n: int) -> float:
        return asyncio.run(_claim_and_complete(self.conninfo, self.schema, n))

    def close(self) -> None:
        self.app.close()
        self.conn.close()


async def _claim_and_complete(conninfo: str, schema: str, n: int) -> float:
    """Defer ``n`` jobs, then fetch and finish them one by one as its worker does: seconds."""
    app = make_app(conninfo, schema)
    async with app.open_async():
        manager = app.job_manager
        await app.tasks["noop"].batch_defer_async(*({} for _ in range(n)))
        worker_id = await manager.register_worker()
        done = 0
        started = time.perf_counter()
        while (job := await manager.fetch_job(queues=None, worker_id=worker_id)) is not None:
            await manager.finish_job(job, Status.SUCCEEDED, delete_job=False)
            done += 1
        seconds = time.perf_counter() - started
        await manager.unregister_worker(worker_id)
    if done != n:
        raise RuntimeError(f"finished {done} jobs, expected {n}")
    return seconds


def open_peer(conninfo: str, schema: str) -> ProcrastinatePeer:
    """Open procrastinate on ``schema`` and install its schema there."""
    return ProcrastinatePeer(conninfo, schema)


async def _work(conninfo: str, schema: str, concurrency: int) -> None:
    app = make_app(conninfo, schema)
    async with app.open_async():
        print("ready", flush=True)
        await app.run_worker_async(concurrency=concurrency, wait=True)


def main(argv: list[str] | None = None) -> int:
    """``worker --conninfo DSN --schema S [--concurrency N]``: run a worker until SIGTERM."""
    return protocol.worker_main(MODULE, _work, argv)


if __name__ == "__main__":
    sys.exit(main())
