"""The floor of enqueue-to-start latency on PostgreSQL, on this machine (issue 21).

``python -m bench.latency_floor [--database-url URL] [--jobs 200] [--rounds 3]`` measures what
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
from typing import Any

import psycopg

from bench.peers.runner import conninfo
from bench.targets import DEFAULT_POSTGRES_URL

INTERVAL_S = 0.020
#: The table and channel, of this process's own (runs side by side do not meet).
TABLE = f"kickside_latency_floor_{os.getpid()}"
CLAIM = (
    "UPDATE {table} SET state = 'executing', attempted_at = now() WHERE id IN "
    "(SELECT id FROM {table} WHERE state = 'available' ORDER BY id LIMIT 10 "
    "FOR UPDATE SKIP LOCKED) RETURNING id"
)
INSERT = (
    "WITH ins AS (INSERT INTO {table} (state, args) VALUES ('available', %s) RETURNING id) "
    "SELECT id FROM ins, pg_notify('{table}', 'default')"
)


def _starter(stamps_in: Any, out: Any) -> None:
    """The executor process of ``pipe``: stamp each id as it arrives."""
    stamps: list[tuple[int, int]] = []
    while (message := stamps_in.recv()) is not None:
        stamps.append((message, time.monotonic_ns()))
    out.send(stamps)


def _listener(
    dsn: str, table: str, placement: str, to_starter: Any, out: Any, ready: Any, stop: Any
) -> None:
    """Wait for notifications; at each, claim what is there and start it (or pass it on)."""
    listen = psycopg.connect(dsn, autocommit=True)
    listen.execute(f"LISTEN {table}")
    claim = psycopg.connect(dsn, autocommit=True)
    claim_sql = CLAIM.format(table=table)
    stamps: list[tuple[int, int]] = []
    ready.set()
    while not stop.is_set():
        for _ in listen.notifies(timeout=0.2):
            for (job_id,) in claim.execute(claim_sql).fetchall():
                if placement == "inline":
                    stamps.append((job_id, time.monotonic_ns()))
                else:
                    to_starter.send(job_id)
    if placement == "pipe":
        to_starter.send(None)
    out.send(stamps)
    listen.close()
    claim.close()


def measure(dsn: str, placement: str, jobs: int) -> dict[str, float]:
    """One round: ``jobs`` enqueued 20 ms apart; p50/p99 from the call and from the commit."""
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(
        f"CREATE TABLE {TABLE} (id bigserial PRIMARY KEY, state text NOT NULL, args jsonb, "
        "attempted_at timestamptz)"
    )
    conn.execute(f"CREATE INDEX ON {TABLE} (state, id)")
    ctx = mp.get_context("spawn")
    to_starter_r, to_starter_w = ctx.Pipe(False)
    starter_r, starter_w = ctx.Pipe(False)
    listener_r, listener_w = ctx.Pipe(False)
    ready, stop = ctx.Event(), ctx.Event()
    starter = ctx.Process(target=_starter, args=(to_starter_r, starter_w))
    listener = ctx.Process(
        target=_listener, args=(dsn, TABLE, placement, to_starter_w, listener_w, ready, stop)
    )
    starter.start()
    listener.start()
    try:
        ready.wait(30)
        time.sleep(0.5)
        sent: dict[int, tuple[int, int]] = {}
        origin = time.monotonic()
        for i in range(jobs):
            before = time.monotonic_ns()
            row = conn.execute(INSERT.format(table=TABLE), ('{"log": "floor"}',)).fetchone()
            assert row is not None
            sent[row[0]] = (before, time.monotonic_ns())
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
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
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
    args = parser.parse_args(argv)
    dsn = conninfo(args.database_url)
    rounds: dict[str, list[dict[str, float]]] = {"inline": [], "pipe": []}
    for _ in range(args.rounds):
        for placement in rounds:
            rounds[placement].append(measure(dsn, placement, args.jobs))
    print(f"PostgreSQL enqueue-to-start floor, {args.jobs} jobs x {args.rounds} rounds (ms):")
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
