"""oban (Python, oban-py), through its documented API: ``enqueue_many``, ``enqueue`` and an
``Oban`` instance in server mode whose ``default`` queue runs the workload's concurrency.

oban-py needs Python 3.12+, so this peer runs in ``bench/.peers312-venv`` (see
:mod:`bench.peers.runner`). Its tables live in the run's own PostgreSQL schema (oban's
``prefix``), installed by ``oban.schema.install``; its connection pools are made by
``Oban.create_pool`` with their defaults. Workers are ``@worker`` classes with an
``async def process``, oban-py's way (every oban-py job runs on the event loop). SIGTERM stops
the instance gracefully (``Oban.stop``, waiting up to its shutdown grace for running jobs).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from importlib import metadata
from typing import Any

import psycopg

from bench.peers import protocol

MODULE = "bench.peers.oban_peer"
QUEUE = "default"

try:  # imported by the driver and the worker (the 3.12 environment) only
    from oban import Oban, worker  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - the harness's own interpreter, for type checks
    Oban = worker = None


if worker is not None:

    @worker(queue=QUEUE)
    class Noop:
        """Nothing."""

        async def process(self, job: Any) -> None:
            return None

    @worker(queue=QUEUE)
    class Io:
        """Wait as an I/O call would (io_drain)."""

        async def process(self, job: Any) -> None:
            await asyncio.sleep(job.args["seconds"])

    @worker(queue=QUEUE)
    class Stamp:
        """Record when this body began."""

        async def process(self, job: Any) -> None:
            protocol.write_stamp(job.args["log"], job.id)

    WORKERS: dict[str, Any] = {"noop": Noop, "io": Io, "stamp": Stamp}


class ObanPeer:
    """oban-py on one schema, enqueueing from an event loop of its own (client mode)."""

    name = "oban"
    module = MODULE

    def __init__(self, conninfo: str, schema: str) -> None:
        self.version = metadata.version("oban")
        self.loop = asyncio.new_event_loop()
        self.pool = self.loop.run_until_complete(Oban.create_pool(conninfo))
        self.loop.run_until_complete(_install(self.pool, schema))
        self.oban = self.loop.run_until_complete(Oban(pool=self.pool, prefix=schema).start())
        self.conn = psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")

    def reset(self) -> None:
        self.conn.execute("TRUNCATE oban_jobs")

    def bulk_enqueue(self, n: int, task: str = "noop", args: dict[str, Any] | None = None) -> None:
        jobs = [WORKERS[task].new(dict(args or {})) for _ in range(n)]
        self.loop.run_until_complete(self.oban.enqueue_many(jobs))

    def backend_pid(self) -> int:
        return int(self.conn.info.backend_pid)

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        job = self.loop.run_until_complete(self.oban.enqueue(WORKERS[task].new(args)))
        return str(job.id)

    def completed(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM oban_jobs WHERE state = 'completed'"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.loop.run_until_complete(self.oban.stop())
        self.loop.run_until_complete(self.pool.close())
        self.loop.close()
        self.conn.close()


async def _install(pool: Any, schema: str) -> None:
    from oban.schema import install  # type: ignore[import-not-found]

    await install(pool, prefix=schema)


def open_peer(conninfo: str, schema: str) -> ObanPeer:
    """Open oban on ``schema`` and install its tables there."""
    return ObanPeer(conninfo, schema)


async def _work(conninfo: str, schema: str, concurrency: int) -> None:
    pool = await Oban.create_pool(conninfo)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with Oban(pool=pool, prefix=schema, queues={QUEUE: concurrency}):
            print("ready", flush=True)
            await stop.wait()
    finally:
        await pool.close()


def main(argv: list[str] | None = None) -> int:
    """``worker --conninfo DSN --schema S [--concurrency N]``: run oban until SIGTERM."""
    return protocol.worker_main(MODULE, _work, argv)


if __name__ == "__main__":
    sys.exit(main())
