"""The floor of enqueue-to-start latency on PostgreSQL, on this machine (issue 21).

``python -m bench.latency_floor [--database-url URL] [--jobs 200] [--rounds 3]
[--writes three_columns|kickside]`` measures what
no job queue built on LISTEN/NOTIFY can beat here, with raw psycopg and nothing else: the
enqueuer inserts a three-column row and notifies in one autocommit statement (as Kickside's
single enqueue does), 20 ms apart as workload 4 (``latency``) does; a listener process,
woken by the notification, claims the row with one ``UPDATE ... RETURNING`` on a second
autocommit connection (``FOR UPDATE SKIP LOCKED``, as every peer's claim), and the job
"starts" there:

- ``inline``: in the listener process itself, at once (a queue that runs jobs in the process
  that claims them, as pgqueuer does);
- ``pipe``: in another process, after the claimed id crossed a pipe (a queue that runs jobs
  in executor processes apart from the claiming supervisor, as Kickside does for crash
  isolation).

``--writes kickside`` measures the same with Kickside's writes instead of the three-column
row, still with none of its code on the clock: the enqueuer sends the statement
``JobBuilder("noop", {}).insert`` sends (Kickside's job row into a migrated schema, its
indexes and constraints, the NOTIFY on Kickside's channel), its row built before the stamp;
the claim is a pool's (lease, attempt, run row inserted, as ``bench.drain_floor``'s). The
floor of any queue that keeps Kickside's contract.

Latency runs from before the insert call, as workload 4 measures it (``CLOCK_MONOTONIC``
stamps, comparable across processes on Linux); "from commit" runs from its return. Each round
uses a fresh table; the figures are the medians of the rounds' p50 and p99. Compare them with
``python -m bench.run --only async_latency --peers pgqueuer`` run beside them: the figures and
what they rule out are in docs/about/performance.md.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from bench.drain_floor import CLAIM as KICKSIDE_CLAIM
from bench.peers.runner import conninfo
from bench.targets import DEFAULT_POSTGRES_URL, postgresql_target
from kickside_engine import JobBuilder
from kickside_engine.clock import utcnow
from kickside_engine.job_row import build_row
from kickside_engine.store.inserts import single_insert_statement
from kickside_engine.store.notify import channel_name

INTERVAL_S = 0.020
#: The table and channel, of this process's own (runs side by side do not meet).
TABLE = f"kickside_latency_floor_{os.getpid()}"
CLAIM = (
    "UPDATE {table} SET state = 'executing', attempted_at = now() WHERE id IN "
    "(SELECT id FROM {table} WHERE state = 'available' ORDER BY id LIMIT %(limit)s "
    "FOR UPDATE SKIP LOCKED) RETURNING id"
)
INSERT = (
    "WITH ins AS (INSERT INTO {table} (state, args) VALUES ('available', %s) RETURNING id) "
    "SELECT id FROM ins, pg_notify('{table}', 'default')"
)
#: What a claim takes at most (the listener claims whatever a notification finds).
CLAIM_LIMIT = 10


@dataclass(frozen=True)
class Shape:
    """What a round writes: every connection's options, the listener's channel and claim, and
    one enqueue."""

    options: str
    channel: str
    claim: str
    #: Enqueue one job on the connection: its id, and monotonic stamps around the statement.
    enqueue: Callable[[psycopg.Connection[Any]], tuple[Any, int, int]]


@contextmanager
def three_columns(dsn: str) -> Iterator[Shape]:
    """A fresh three-column table of this process's own, dropped after."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(
            f"CREATE TABLE {TABLE} (id bigserial PRIMARY KEY, state text NOT NULL, "
            "args jsonb, attempted_at timestamptz)"
        )
        conn.execute(f"CREATE INDEX ON {TABLE} (state, id)")
        insert = INSERT.format(table=TABLE)

        def enqueue(c: psycopg.Connection[Any]) -> tuple[Any, int, int]:
            before = time.monotonic_ns()
            row = c.execute(insert, ('{"log": "floor"}',)).fetchone()
            assert row is not None
            return row[0], before, time.monotonic_ns()

        try:
            yield Shape("", TABLE, CLAIM.format(table=TABLE), enqueue)
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")


@contextmanager
def kickside_writes(url: str) -> Iterator[Shape]:
    """A migrated schema of this process's own, dropped after; Kickside's statements."""
    with postgresql_target(url, f"bench_latency_floor_{os.getpid()}") as target:
        db = target.open()
        options = JobBuilder("noop", {}).options

        def enqueue(c: psycopg.Connection[Any]) -> tuple[Any, int, int]:
            row = build_row(options, utcnow())
            sql, params = single_insert_statement(db, row)
            before = time.monotonic_ns()
            c.execute(sql, params)
            return row["id"], before, time.monotonic_ns()

        try:
            yield Shape(
                f"-c search_path={target.schema}", channel_name(db), KICKSIDE_CLAIM, enqueue
            )
        finally:
            db.dispose()


def _starter(stamps_in: Any, out: Any) -> None:
    """The executor process of ``pipe``: stamp each id as it arrives."""
    stamps: list[tuple[Any, int]] = []
    while (message := stamps_in.recv()) is not None:
        stamps.append((message, time.monotonic_ns()))
    out.send(stamps)


def _listener(
    dsn: str,
    shape: tuple[str, str, str],
    placement: str,
    to_starter: Any,
    out: Any,
    ready: Any,
    stop: Any,
) -> None:
    """Wait for notifications; at each, claim what is there and start it (or pass it on)."""
    options, channel, claim_sql = shape
    listen = psycopg.connect(dsn, autocommit=True)
    listen.execute(f'LISTEN "{channel}"')
    claim = psycopg.connect(dsn, autocommit=True, options=options)
    stamps: list[tuple[Any, int]] = []
    ready.set()
    while not stop.is_set():
        for _ in listen.notifies(timeout=0.2):
            for (job_id,) in claim.execute(claim_sql, {"limit": CLAIM_LIMIT}).fetchall():
                if placement == "inline":
                    stamps.append((job_id, time.monotonic_ns()))
                else:
                    to_starter.send(job_id)
    if placement == "pipe":
        to_starter.send(None)
    out.send(stamps)
    listen.close()
    claim.close()


def measure(dsn: str, placement: str, jobs: int, shape: Shape) -> dict[str, float]:
    """One round: ``jobs`` enqueued 20 ms apart; p50/p99 from the call and from the commit."""
    ctx = mp.get_context("spawn")
    to_starter_r, to_starter_w = ctx.Pipe(False)
    starter_r, starter_w = ctx.Pipe(False)
    listener_r, listener_w = ctx.Pipe(False)
    ready, stop = ctx.Event(), ctx.Event()
    starter = ctx.Process(target=_starter, args=(to_starter_r, starter_w))
    listened = (shape.options, shape.channel, shape.claim)
    listener = ctx.Process(
        target=_listener, args=(dsn, listened, placement, to_starter_w, listener_w, ready, stop)
    )
    starter.start()
    listener.start()
    conn = psycopg.connect(dsn, autocommit=True, options=shape.options)
    try:
        ready.wait(30)
        time.sleep(0.5)
        sent: dict[Any, tuple[int, int]] = {}
        origin = time.monotonic()
        for i in range(jobs):
            job_id, before, after = shape.enqueue(conn)
            sent[job_id] = (before, after)
            pause = origin + (i + 1) * INTERVAL_S - time.monotonic()
            if pause > 0:
                time.sleep(pause)
        time.sleep(0.5)
    finally:
        stop.set()
        stamps = listener_r.recv() if listener_r.poll(10) else []
        if placement == "pipe":
            stamps = starter_r.recv() if starter_r.poll(10) else []
        else:
            to_starter_w.send(None)
        listener.join(10)
        starter.join(10)
        conn.close()
    from_call = sorted((at - sent[i][0]) / 1e6 for i, at in stamps if i in sent)
    from_commit = sorted((at - sent[i][1]) / 1e6 for i, at in stamps if i in sent)
    calls = sorted((after - before) / 1e6 for before, after in sent.values())
    if len(from_call) != jobs:
        raise RuntimeError(f"{placement}: {len(from_call)} of {jobs} jobs started")
    return {
        "insert_call_p50_ms": statistics.median(calls),
        "p50_ms": statistics.median(from_call),
        "p99_ms": from_call[min(len(from_call) - 1, int(len(from_call) * 0.99))],
        "commit_p50_ms": statistics.median(from_commit),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure both placements ``--rounds`` times, alternately; print the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.latency_floor")
    parser.add_argument("--database-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--writes",
        choices=("three_columns", "kickside"),
        default="three_columns",
        help="a three-column row, or Kickside's row, claim and run row",
    )
    args = parser.parse_args(argv)
    dsn = conninfo(args.database_url)
    rounds: dict[str, list[dict[str, float]]] = {"inline": [], "pipe": []}
    for _ in range(args.rounds):
        for placement in rounds:
            with (
                kickside_writes(args.database_url)
                if args.writes == "kickside"
                else three_columns(dsn)
            ) as shape:
                rounds[placement].append(measure(dsn, placement, args.jobs, shape))
    print(
        f"PostgreSQL enqueue-to-start floor, {args.writes} writes, {args.jobs} jobs x "
        f"{args.rounds} rounds (ms):"
    )
    print("| placement | insert call p50 | p50 | p99 | from commit p50 | rounds' p50 |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for placement, results in rounds.items():
        med = {k: statistics.median(r[k] for r in results) for k in results[0]}
        each = ", ".join(f"{r['p50_ms']:.2f}" for r in results)
        print(
            f"| {placement} | {med['insert_call_p50_ms']:.2f} | {med['p50_ms']:.2f} | "
            f"{med['p99_ms']:.2f} | {med['commit_p50_ms']:.2f} | {each} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
