"""pgqueuer, through its documented API: batch and single ``enqueue``, and a QueueManager.

Its objects live in the run's own PostgreSQL schema (``PGQUEUER_SCHEMA``, set by the runner,
and every connection's ``search_path``), with the default "durable" tables. The worker uses
asyncpg, pgqueuer's recommended driver, and the default dequeue batch of 10; SIGTERM sets its
shutdown event.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from importlib import metadata
from typing import Any

import psycopg

from bench.peers import protocol

MODULE = "bench.peers.pgqueuer_peer"


async def noop(job: Any) -> None:
    """Nothing."""


async def stamp(job: Any) -> None:
    """Record when this body began."""
    protocol.write_stamp(json.loads(job.payload)["log"], job.id)


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
        asyncio.run(_install(conninfo, schema))
        self.conn = psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")
        self.queries = SyncQueries(SyncPsycopgDriver(self.conn))

    def reset(self) -> None:
        self.conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")

    def bulk_enqueue(self, n: int) -> None:
        self.queries.enqueue(["noop"] * n, [None] * n, [0] * n)

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        (job_id,) = self.queries.enqueue(task, json.dumps(args).encode())
        return str(job_id)

    def completed(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.conn.close()


def open_peer(conninfo: str, schema: str) -> PgqueuerPeer:
    """Open pgqueuer on ``schema`` and install its tables there."""
    return PgqueuerPeer(conninfo, schema)


async def _work(conninfo: str, schema: str) -> None:
    from pgqueuer import PgQueuer

    conn = await _connect(conninfo, schema)
    pgq = PgQueuer.from_asyncpg_connection(conn)
    pgq.qm.entrypoint("noop")(noop)
    pgq.qm.entrypoint("stamp")(stamp)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, pgq.shutdown.set)
    print("ready", flush=True)
    await pgq.qm.run(batch_size=10)


def main(argv: list[str] | None = None) -> int:
    """``worker --conninfo DSN --schema S``: run a QueueManager until SIGTERM."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("--conninfo", required=True)
    parser.add_argument("--schema", required=True)
    args = parser.parse_args(argv)
    asyncio.run(_work(args.conninfo, args.schema))
    return 0


if __name__ == "__main__":
    sys.exit(main())
