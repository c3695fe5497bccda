"""chancy, through its documented API: ``sync_push_many``, ``sync_push`` and a Worker whose
queue runs on chancy's ``AsyncExecutor`` (its executor for ``async def`` jobs).

Its tables live in the run's own PostgreSQL schema (every connection's ``search_path``, set in
the DSN), with chancy's default plugins (leadership, pruner, recovery). The worker declares the
``default`` queue with the workload's concurrency, ``Chancy.Executor.Async`` and
``eager_polling`` (fetch again as soon as a job finishes: chancy documents it for queues whose
jobs are continuously available; without it a worker fetches only when notified of new jobs or
once per ``polling_interval``, so a drain would wait seconds between batches). A worker sends
job outcomes to the database in batches once a second (chancy's ``send_outgoing_interval``), so
a drain's last completions are seen up to a second late. SIGTERM is its graceful stop.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from importlib import metadata
from typing import Any
from urllib.parse import quote

import psycopg

from bench.peers import protocol

MODULE = "bench.peers.chancy_peer"
QUEUE = "default"


async def noop() -> None:
    """Nothing."""


async def io(seconds: float) -> None:
    """Wait as an I/O call would (io_drain)."""
    await asyncio.sleep(seconds)


async def stamp(log: str, token: str) -> None:
    """Record when this body began (``token``: the id the enqueuer returned)."""
    protocol.write_stamp(log, token)


TASKS = {"noop": noop, "io": io, "stamp": stamp}


def dsn(conninfo: str, schema: str) -> str:
    """``conninfo`` with every connection's ``search_path`` set to ``schema``."""
    options = quote(f"-c search_path={schema}")
    return f"{conninfo}{'&' if '?' in conninfo else '?'}options={options}"


def _job(task: str, args: dict[str, Any] | None) -> Any:
    from chancy import Job  # type: ignore[import-not-found]

    return Job.from_func(TASKS[task]).with_queue(QUEUE).with_kwargs(**(args or {}))


async def _migrate(conninfo: str, schema: str) -> None:
    from chancy import Chancy

    async with Chancy(dsn(conninfo, schema), log=_quiet_log()) as chancy:
        await chancy.migrate()


class ChancyPeer:
    """chancy on one schema, enqueueing through its synchronous API."""

    name = "chancy"
    module = MODULE

    def __init__(self, conninfo: str, schema: str) -> None:
        from chancy import Chancy

        self.version = metadata.version("chancy")
        asyncio.run(_migrate(conninfo, schema))
        self.conn = psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")
        self.chancy = Chancy(dsn(conninfo, schema), log=_quiet_log()).__enter__()
        self.tokens = 0

    def reset(self) -> None:
        self.conn.execute("TRUNCATE chancy_jobs")

    def bulk_enqueue(self, n: int, task: str = "noop", args: dict[str, Any] | None = None) -> None:
        for _ in self.chancy.sync_push_many([_job(task, args) for _ in range(n)]):
            pass

    def backend_pid(self) -> int:
        return int(self.conn.info.backend_pid)

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        self.tokens += 1
        token = f"t{self.tokens}"
        self.chancy.sync_push(_job(task, {**args, "token": token}))
        return token

    def completed(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM chancy_jobs WHERE state = 'succeeded'"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.chancy.__exit__(None, None, None)
        self.conn.close()


def open_peer(conninfo: str, schema: str) -> ChancyPeer:
    """Open chancy on ``schema`` and migrate its tables there."""
    return ChancyPeer(conninfo, schema)


def _quiet_log() -> logging.Logger:
    """Warnings and errors on stderr: chancy's default logger writes a line per job to stdout
    (which the harness reads), a cost no other system pays here."""
    log = logging.getLogger("bench.chancy")
    log.setLevel(logging.WARNING)
    log.addHandler(logging.StreamHandler(sys.stderr))
    return log


async def _work(conninfo: str, schema: str, concurrency: int) -> None:
    from chancy import Chancy, Queue, Worker

    async with Chancy(dsn(conninfo, schema), log=_quiet_log()) as chancy:
        await chancy.declare(
            Queue(
                QUEUE,
                concurrency=concurrency,
                executor=Chancy.Executor.Async,
                eager_polling=True,
                polling_interval=1,
            ),
            upsert=True,
        )
        async with Worker(chancy) as worker:
            print("ready", flush=True)
            await worker.wait_for_shutdown()


def main(argv: list[str] | None = None) -> int:
    """``worker --conninfo DSN --schema S [--concurrency N]``: run a Worker until SIGTERM."""
    return protocol.worker_main(MODULE, _work, argv)


if __name__ == "__main__":
    sys.exit(main())
