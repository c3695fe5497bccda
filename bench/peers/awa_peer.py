"""awa (``awa-pg``: a Rust core with Python bindings), through its documented Python API:
``AsyncClient.insert_many_copy`` (its batch insert, by COPY), ``insert``, and a worker
started with ``AsyncClient.start([(queue, max_workers)])`` running ``async def`` task handlers.

awa keeps its tables in a schema of its own named ``awa`` (fixed: its SQL names it), not in
the run's schema. The peer therefore refuses to run when ``awa`` already exists in the
database (someone's real awa), migrates it, and drops it when it closes. Jobs are never deleted
between runs. awa 0.6.9 keeps jobs in more than one storage (a batch insert by COPY lands
in its ring-slot queue storage, a small one in ``awa.jobs_hot``) and a finished job leaves its
``awa.jobs`` view, so the peer counts the jobs it enqueued since :meth:`AwaPeer.reset` less
those the view still lists unfinished: a job counts as done once awa no longer lists it as
waiting or running.
The workers' defaults are awa's (poll interval 200 ms, LISTEN/NOTIFY wake-ups). SIGTERM stops
the worker through ``AsyncClient.shutdown``, which waits for running jobs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
from importlib import metadata
from typing import Any

import psycopg

from bench.peers import protocol

MODULE = "bench.peers.awa_peer"
QUEUE = "default"
AWA_SCHEMA = "awa"


@dataclasses.dataclass
class Noop:
    """A no-op job's (empty) args."""


@dataclasses.dataclass
class Io:
    """An I/O-bound job: how long it waits."""

    seconds: float


@dataclasses.dataclass
class Stamp:
    """A latency job: the stamp file."""

    log: str


ARGS: dict[str, Any] = {"noop": Noop, "io": Io, "stamp": Stamp}


async def noop(job: Any) -> None:
    """Nothing."""


async def io(job: Any) -> None:
    """Wait as an I/O call would (io_drain)."""
    await asyncio.sleep(job.args.seconds)


async def stamp(job: Any) -> None:
    """Record when this body began."""
    protocol.write_stamp(job.args.log, job.id)


def register(client: Any) -> None:
    """The benchmark's task handlers, on ``client`` (``client.task`` is awa's decorator)."""
    for kind, handler in (("noop", noop), ("io", io), ("stamp", stamp)):
        client.task(ARGS[kind], kind=kind, queue=QUEUE)(handler)


class AwaPeer:
    """awa in its ``awa`` schema, enqueueing from an event loop of its own."""

    name = "awa"
    module = MODULE

    def __init__(self, conninfo: str, schema: str) -> None:
        import awa  # type: ignore[import-not-found]

        self.version = metadata.version("awa-pg")
        self.conn = psycopg.connect(conninfo, autocommit=True)
        found = self.conn.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", (AWA_SCHEMA,)
        ).fetchone()
        if found is not None:
            self.conn.close()
            raise RuntimeError(
                f"schema {AWA_SCHEMA!r} already exists in this database: awa keeps its tables "
                "there, and the benchmark will not touch an existing installation"
            )
        self.loop = asyncio.new_event_loop()
        self.client = awa.AsyncClient(conninfo)
        self.loop.run_until_complete(self.client.migrate())
        self.enqueued = 0

    def reset(self) -> None:
        self.enqueued = 0

    def bulk_enqueue(self, n: int, task: str = "noop", args: dict[str, Any] | None = None) -> None:
        jobs = [ARGS[task](**(args or {})) for _ in range(n)]
        self.loop.run_until_complete(self.client.insert_many_copy(jobs, queue=QUEUE))
        self.enqueued += n

    def backend_pid(self) -> int:
        return int(self.conn.info.backend_pid)

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        job = self.loop.run_until_complete(self.client.insert(ARGS[task](**args), queue=QUEUE))
        self.enqueued += 1
        return str(job.id)

    def completed(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM awa.jobs WHERE state::text <> 'completed'"
        ).fetchone()
        return self.enqueued - (int(row[0]) if row else 0)

    def close(self) -> None:
        self.loop.run_until_complete(self.client.close())
        self.loop.close()
        self.conn.execute(f"DROP SCHEMA IF EXISTS {AWA_SCHEMA} CASCADE")
        self.conn.close()


def open_peer(conninfo: str, schema: str) -> AwaPeer:
    """Open awa (in its own ``awa`` schema; ``schema`` is unused) and migrate it."""
    return AwaPeer(conninfo, schema)


async def _work(conninfo: str, schema: str, concurrency: int) -> None:
    """awa's worker until SIGTERM (in its own ``awa`` schema; ``schema`` is unused)."""
    import awa

    client = awa.AsyncClient(conninfo)
    register(client)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await client.start([(QUEUE, concurrency)])
    try:
        print("ready", flush=True)
        await stop.wait()
    finally:
        await client.shutdown(timeout_ms=30_000)
        await client.close()


def main(argv: list[str] | None = None) -> int:
    """``worker --conninfo DSN --schema S [--concurrency N]``: run awa's worker until SIGTERM."""
    return protocol.worker_main(MODULE, _work, argv)


if __name__ == "__main__":
    sys.exit(main())
