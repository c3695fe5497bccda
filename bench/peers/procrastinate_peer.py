"""procrastinate, through its documented API: ``batch_defer``, ``defer`` and an async worker.

Its schema lives in the run's own PostgreSQL schema (every connection's ``search_path``). The
worker is procrastinate's own, with its defaults (LISTEN/NOTIFY on, polling as fallback) and
``concurrency=10``; SIGTERM is its graceful stop.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from importlib import metadata
from typing import Any

import psycopg
from procrastinate import App, PsycopgConnector  # type: ignore[import-not-found]

from bench.peers import protocol

MODULE = "bench.peers.procrastinate_peer"


async def noop() -> None:
    """Nothing."""


async def stamp(context: Any, log: str) -> None:
    """Record when this body began."""
    protocol.write_stamp(log, context.job.id)


def make_app(conninfo: str, schema: str) -> Any:
    """An App on ``schema``, with the benchmark's two tasks."""
    connector = PsycopgConnector(conninfo=conninfo, kwargs={"options": f"-c search_path={schema}"})
    app = App(connector=connector)
    app.task(name="noop")(noop)
    app.task(name="stamp", pass_context=True)(stamp)
    return app


class ProcrastinatePeer:
    """procrastinate on one schema, opened synchronously for enqueueing."""

    name = "procrastinate"
    module = MODULE

    def __init__(self, conninfo: str, schema: str) -> None:
        self.version = metadata.version("procrastinate")
        self.conn = psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")
        self.app = make_app(conninfo, schema)
        self.app.open()
        self.app.schema_manager.apply_schema()

    def reset(self) -> None:
        self.conn.execute("TRUNCATE procrastinate_jobs CASCADE")

    def bulk_enqueue(self, n: int) -> None:
        self.app.tasks["noop"].batch_defer(*({} for _ in range(n)))

    def enqueue_one(self, task: str, args: dict[str, Any]) -> str:
        return str(self.app.tasks[task].defer(**args))

    def completed(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        ).fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        self.app.close()
        self.conn.close()


def open_peer(conninfo: str, schema: str) -> ProcrastinatePeer:
    """Open procrastinate on ``schema`` and install its schema there."""
    return ProcrastinatePeer(conninfo, schema)


async def _work(conninfo: str, schema: str) -> None:
    app = make_app(conninfo, schema)
    async with app.open_async():
        print("ready", flush=True)
        await app.run_worker_async(concurrency=protocol.CONCURRENCY, wait=True)


def main(argv: list[str] | None = None) -> int:
    """``worker --conninfo DSN --schema S``: run a worker until SIGTERM."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("command", choices=["worker"])
    parser.add_argument("--conninfo", required=True)
    parser.add_argument("--schema", required=True)
    args = parser.parse_args(argv)
    asyncio.run(_work(args.conninfo, args.schema))
    return 0


if __name__ == "__main__":
    sys.exit(main())
