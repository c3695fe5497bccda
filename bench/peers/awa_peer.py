"""awa (``awa-pg``: a Rust core with Python bindings), through its documented Python API:
``AsyncClient.insert_many_copy`` (its batch insert, by COPY), ``insert``, and a worker
started with ``AsyncClient.start([(queue, max_workers)])`` running ``async def`` task handlers.

awa keeps its tables in a schema of its own named ``awa`` (fixed: its SQL names it), not in
the run's schema. The peer therefore refuses to run when ``awa`` already exists in the
database (someone's real awa), migrates it, and drops it when it closes.

Counting completions. The first worker to start on the fresh install switches awa 0.6.9 to
its queue storage engine (``awa.storage_auto_finalize_if_fresh``): jobs live in rotating ring
partitions, a successful short job is recorded in a compact ``receipt_completion_batches`` row
(one row per batch of completions, ``completed_count`` jobs), any other completion in a
``done_entries`` row, and awa's maintenance prunes a sealed slot (about every second, 16 slots)
by adding its completed jobs to ``queue_terminal_rollups.pruned_completed_count`` in the
transaction that truncates it. The sum of the four (rollups, plus retained batches, less their
tombstones, plus retained completed ``done_entries``) is the exact count of completed jobs in a
queue, from the parts awa's own exact counts read and its prune folds, and it only grows
(awa's prune also folds a cancelled ``done_entries`` row into that rollup; the benchmark cancels
nothing): :meth:`AwaPeer.completed` is that sum less its value at :meth:`AwaPeer.reset`, read in
one statement, a few small aggregates a poll (about 1 ms).

Not the ``awa.jobs`` view: it is a set-returning PL/pgSQL function (``awa.jobs_compat()``) that
builds every retained job's row, history included, so each 50 ms poll of a drain held the
server's CPU (the drain never finished); and it never lists a job claimed by a receipt and still
running, so "enqueued less listed unfinished" counted running jobs as done.

awa's jobs are not deleted between runs (its worker runs on while the harness resets, and awa
prunes its own history); the count is scoped by the baseline: a reset comes after the previous
run's jobs have all finished (a drain waits for every completion, and a worker is stopped
through ``shutdown``, which waits for running jobs), so every completion after it is the run's.
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
from psycopg import sql

from bench.peers import protocol

MODULE = "bench.peers.awa_peer"
QUEUE = "default"
AWA_SCHEMA = "awa"
#: awa's exact count of completed jobs in a queue, from its queue storage's tables (``{qs}``,
#: the schema ``awa.active_queue_storage_schema()`` names): completions pruned with their ring
#: slot, plus those in retained compact receipt batches less the batch entries tombstoned (a
#: completed job deleted), plus retained completed ``done_entries`` rows. One statement: its
#: partitions are locked before its snapshot is taken, so a prune (rollup added and slot
#: truncated in one transaction) is seen whole or not at all.
COMPLETED = """
SELECT
    (SELECT COALESCE(sum(pruned_completed_count), 0)::bigint
       FROM {qs}.queue_terminal_rollups WHERE queue = %(queue)s)
  + (SELECT COALESCE(sum(completed_count), 0)::bigint
       FROM {qs}.receipt_completion_batches WHERE queue = %(queue)s)
  - (SELECT count(*) FROM {qs}.receipt_completion_tombstones WHERE queue = %(queue)s)
  + (SELECT count(*) FROM {qs}.done_entries WHERE queue = %(queue)s AND state = 'completed')
"""


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
        self.count_statement: sql.Composed | None = None
        self.baseline = 0

    def _completed_total(self) -> int | None:
        """Every job of :data:`QUEUE` awa ever completed (``None`` before its queue storage
        engine is active: the first worker to start switches it on)."""
        if self.count_statement is None:
            row = self.conn.execute("SELECT awa.active_queue_storage_schema()").fetchone()
            if row is None or row[0] is None:
                return None
            self.count_statement = sql.SQL(COMPLETED).format(qs=sql.Identifier(row[0]))
        found = self.conn.execute(self.count_statement, {"queue": QUEUE}).fetchone()
        return int(found[0]) if found else 0

    def reset(self) -> None:
        """Start the count of completions from zero (awa's jobs stay: see the module's doc)."""
        self.baseline = self._completed_total() or 0

    def bulk_enqueue(self, n: int, task: str = "noop", args: dict[str, Any] | None = None) -> None:
        jobs = [ARGS[task](**(args or {})) for _ in range(n)]
        self.loop.run_until_complete(self.client.insert_many_copy(jobs, queue=QUEUE))

    def backend_pid(self) -> int:
        return int(self.conn.info.backend_pid)

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        job = self.loop.run_until_complete(self.client.insert(ARGS[task](**args), queue=QUEUE))
        return str(job.id)

    def completed(self) -> int:
        """Jobs completed since :meth:`reset`, by awa's own exact count (see the module's doc)."""
        total = self._completed_total()
        if total is None:
            raise RuntimeError(
                "awa's queue storage engine is not active (no awa worker has started on this "
                "install): the peer counts completions from its tables only"
            )
        return total - self.baseline

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
