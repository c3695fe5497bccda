"""pgqueuer, through its documented API: batch and single ``enqueue``, and a QueueManager.

Its objects live in the run's own PostgreSQL schema (``PGQUEUER_SCHEMA``, set by the runner,
and every connection's ``search_path``), with the default "durable" tables. The worker uses
asyncpg, pgqueuer's recommended driver, and the default dequeue batch of 10; SIGTERM sets its
shutdown event. The async workloads (issue 21) cap it at their concurrency with
``max_concurrent_tasks`` (10, or 200 for ``io_drain``), with a dequeue batch of half that, the
largest the cap allows.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
import uuid
from datetime import timedelta
from importlib import metadata
from typing import Any

import psycopg

from bench.nodes import write_span
from bench.peers import protocol

MODULE = "bench.peers.pgqueuer_peer"
BATCH = 10

# History as pgqueuer keeps it: a finished job leaves its queue table, and its life stays in
# pgqueuer_log (queued, picked, successful), spread over the last six days and already
# aggregated into statistics. Job ids come after the ones in history.
_HISTORY_IDS_SQL = """
SELECT setval(pg_get_serial_sequence('pgqueuer', 'id'),
    nextval(pg_get_serial_sequence('pgqueuer', 'id')) + %(n)s)
"""
_HISTORY_LOG_SQL = """
INSERT INTO pgqueuer_log (created, job_id, status, priority, entrypoint, aggregated)
SELECT now() - interval '6 days' + g * interval '6 days' / %(n)s + s.offset_ms * interval '1 ms',
    %(last)s - %(n)s + g, s.status::pgqueuer_status, 0, 'noop', true
FROM generate_series(1, %(n)s) AS g
CROSS JOIN (VALUES ('queued', 0), ('picked', 5), ('successful', 6)) AS s(status, offset_ms)
"""


async def noop(job: Any) -> None:
    """Nothing."""


async def io(job: Any) -> None:
    """Wait as an I/O call would (io_drain)."""
    await asyncio.sleep(json.loads(job.payload)["seconds"])


async def stamp(job: Any) -> None:
    """Record when this body began."""
    protocol.write_stamp(json.loads(job.payload)["log"], job.id)


async def span(job: Any) -> None:
    """Log this execution (workload 6)."""
    write_span(json.loads(job.payload)["log"], job.id, getattr(job, "attempts", 0))


async def _connect(conninfo: str, schema: str) -> Any:
    import asyncpg  # type: ignore[import-not-found]

    return await asyncpg.connect(conninfo, server_settings={"search_path": schema})


async def _install(conninfo: str, schema: str) -> None:
    from pgqueuer import Queries  # type: ignore[import-not-found]
    from pgqueuer.db import AsyncpgDriver  # type: ignore[import-not-found]

    conn = await _connect(conninfo, schema)
    try:
        await Queries(AsyncpgDriver(conn)).install(create_schema=False)
    finally:
        await conn.close()


class PgqueuerPeer:
    """pgqueuer on one schema, enqueueing through its synchronous queries."""

    name = "pgqueuer"
    module = MODULE

    def __init__(self, conninfo: str, schema: str) -> None:
        from pgqueuer.db import SyncPsycopgDriver
        from pgqueuer.queries import SyncQueries  # type: ignore[import-not-found]

        self.version = metadata.version("pgqueuer")
        self.conninfo, self.schema = conninfo, schema
        asyncio.run(_install(conninfo, schema))
        self.conn = psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")
        self.queries = SyncQueries(SyncPsycopgDriver(self.conn))

    def reset(self) -> None:
        self.conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")

    def bulk_enqueue(self, n: int, task: str = "noop", args: dict[str, Any] | None = None) -> None:
        payload = None if args is None else json.dumps(args).encode()
        self.queries.enqueue([task] * n, [payload] * n, [0] * n)

    def backend_pid(self) -> int:
        return int(self.conn.info.backend_pid)

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        (job_id,) = self.queries.enqueue(task, json.dumps(args).encode())
        return str(job_id)

    def completed(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
        ).fetchone()
        return int(row[0]) if row else 0

    def insert_history(self, size: int) -> None:
        with self.conn.transaction():
            row = self.conn.execute(_HISTORY_IDS_SQL, {"n": size}).fetchone()
            assert row is not None
            self.conn.execute(_HISTORY_LOG_SQL, {"n": size, "last": int(row[0])})
        self.conn.execute("ANALYZE pgqueuer")
        self.conn.execute("ANALYZE pgqueuer_log")

    def claim_and_complete(self, n: int) -> float:
        return asyncio.run(_claim_and_complete(self.conninfo, self.schema, n))

    def close(self) -> None:
        self.conn.close()


async def _claim_and_complete(conninfo: str, schema: str, n: int) -> float:
    """Enqueue ``n`` jobs, then dequeue batches of 10 and log each batch done: seconds."""
    from pgqueuer import Queries
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import EntrypointExecutionParameter

    conn = await _connect(conninfo, schema)
    try:
        queries = Queries(AsyncpgDriver(conn))
        await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
        entrypoints = {"noop": EntrypointExecutionParameter(concurrency_limit=0)}
        manager = uuid.uuid4()
        done = 0
        started = time.perf_counter()
        while jobs := await queries.dequeue(
            batch_size=BATCH,
            entrypoints=entrypoints,
            queue_manager_id=manager,
            global_concurrency_limit=None,
            heartbeat_timeout=timedelta(seconds=30),
        ):
            await queries.log_jobs([(job, "successful", None) for job in jobs])
            done += len(jobs)
        seconds = time.perf_counter() - started
    finally:
        await conn.close()
    if done != n:
        raise RuntimeError(f"finished {done} jobs, expected {n}")
    return seconds


def open_peer(conninfo: str, schema: str) -> PgqueuerPeer:
    """Open pgqueuer on ``schema`` and install its tables there."""
    return PgqueuerPeer(conninfo, schema)


async def _work(conninfo: str, schema: str, concurrency: int | None) -> None:
    from pgqueuer import PgQueuer

    conn = await _connect(conninfo, schema)
    pgq = PgQueuer.from_asyncpg_connection(conn)
    pgq.qm.entrypoint("noop")(noop)
    pgq.qm.entrypoint("stamp")(stamp)
    pgq.qm.entrypoint("span")(span)
    pgq.qm.entrypoint("io")(io)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, pgq.shutdown.set)
    print("ready", flush=True)
    if concurrency is None:
        await pgq.qm.run(batch_size=BATCH)
    else:
        # At most ``concurrency`` jobs in flight: pgqueuer's hard cap, which must be at least
        # twice its dequeue batch.
        await pgq.qm.run(batch_size=max(1, concurrency // 2), max_concurrent_tasks=concurrency)


def main(argv: list[str] | None = None) -> int:
    """``worker --conninfo DSN --schema S [--concurrency N]``: run a QueueManager until SIGTERM
    (with pgqueuer's own batch and no cap when no concurrency is given)."""
    return protocol.worker_main(MODULE, _work, argv, default_concurrency=None)


if __name__ == "__main__":
    sys.exit(main())
