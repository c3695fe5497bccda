"""What each part of a job's writes costs the database, measured without Kickside's code (issues
21 and 26).

``python -m bench.write_cost [--backend sqlite|postgresql] [--jobs 20000] [--rounds 3]
[VARIANT ...]`` migrates a fresh SQLite file (or PostgreSQL schema) per round and variant,
enqueues ``--jobs`` jobs with Kickside, then drains them on one driver connection with the
writes a pool's turns make, 200 jobs at a time: the claim (``UPDATE ... RETURNING``) and the run
rows' insert in one transaction, the settle's job update and run update in the next. Nothing
runs between the statements but binding the ids, so the figure is the database's own work per
job: wall time on SQLite (in process), and on PostgreSQL both the wall time (round trips
included) and the CPU time of the server process that ran the statements. Variants change the
schema or the writes first:

- ``base``: the schema as migrated;
- ``no_worker_state`` / ``worker_only``: without ``ix_kickside_job_worker_state``, or with an
  index on ``worker`` alone (which a state change does not touch on SQLite);
- ``no_inserted_at``: without ``ix_kickside_job_inserted_at``;
- ``runs_at_settle``: each run row inserted whole when its job settles, none at the claim
  (one write per run instead of an insert and an update);
- ``no_runs``: no run history at all (no run row inserted or updated);
- ``updated_at_when`` (PostgreSQL): the job table's ``updated_at`` trigger with a ``WHEN`` that
  leaves alone an update setting ``updated_at`` itself (as every claim and settle does), so the
  server skips the PL/pgSQL call;
- ``no_run_fk`` (PostgreSQL): without the run table's foreign key to the job (its check runs a
  query per inserted run);
- ``run_hot`` (PostgreSQL): without the run table's ``finished_at`` index and with room left
  on its pages (fillfactor 70), so that a run's settle may be a HOT update that enters no index.

Prints the median µs per job of each and every round's figure (SQLite: WAL, synchronous NORMAL;
PostgreSQL: the server's settings). The figures and what they mean are in
docs/about/performance.md.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from bench.cpu import process_tree_cpu_seconds
from bench.peers.runner import conninfo
from bench.targets import DEFAULT_POSTGRES_URL, Target, postgresql_target, sqlite_target
from kickside_engine import JobBuilder, enqueue_fanout

BATCH = 200
VARIANTS = (
    "base",
    "no_worker_state",
    "worker_only",
    "no_inserted_at",
    "runs_at_settle",
    "no_runs",
    "updated_at_when",
    "no_run_fk",
    "run_hot",
)
#: Schema changes per variant, run before the drain.
CHANGES: dict[str, tuple[str, ...]] = {
    "base": (),
    "no_worker_state": ("DROP INDEX ix_kickside_job_worker_state",),
    "worker_only": (
        "DROP INDEX ix_kickside_job_worker_state",
        "CREATE INDEX ix_kickside_job_worker ON kickside_job (worker)",
    ),
    "no_inserted_at": ("DROP INDEX ix_kickside_job_inserted_at",),
    "runs_at_settle": (),
    "no_runs": (),
    "updated_at_when": (
        "DROP TRIGGER kickside_job_updated_at ON kickside_job",
        "CREATE TRIGGER kickside_job_updated_at BEFORE UPDATE ON kickside_job FOR EACH ROW "
        "WHEN (OLD.awaited IS NOT DISTINCT FROM NEW.awaited "
        "AND NEW.updated_at IS NOT DISTINCT FROM OLD.updated_at) "
        "EXECUTE FUNCTION kickside_set_updated_at()",
    ),
    "no_run_fk": (
        "ALTER TABLE kickside_job_run DROP CONSTRAINT fk_kickside_job_run_job_id_kickside_job",
    ),
    "run_hot": (
        "DROP INDEX ix_kickside_job_run_finished_at",
        "ALTER TABLE kickside_job_run SET (fillfactor = 70)",
    ),
}
#: Variants that change what only PostgreSQL has (triggers, enforced foreign keys).
POSTGRESQL_ONLY = {"updated_at_when", "no_run_fk", "run_hot"}
#: A fresh lease token as Kickside's claim makes it: time-ordered (a UUIDv7 of the statement's
#: millisecond and random bits), so that a claim's run rows enter the unique token index at its
#: end (``fresh_token_sql`` in ``kickside_engine/store/claim_statement.py``).
SQLITE_TOKEN = (
    "lower(printf('%012x', CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) || '7' "
    "|| substr(hex(randomblob(2)), 2) || '8' || substr(hex(randomblob(8)), 2))"
)
POSTGRESQL_TOKEN = (
    "CAST(encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING "
    "substring(int8send(floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint) "
    "FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex') AS uuid)"
)
#: The statements, with ``{ids}`` for the batch's placeholders; per backend below.
SQLITE = {
    "now": "2026-12-03 12:00:00.000000",
    "due": "9999-12-31 00:00:00.000000",
    "token": SQLITE_TOKEN,
    "mark": "?",
}
POSTGRESQL = {
    "now": "2026-12-03 12:00:00+00",
    "due": "9999-12-31 00:00:00+00",
    "token": POSTGRESQL_TOKEN,
    "mark": "%s",
}


def claim_sql(d: dict[str, str], limit: int = BATCH) -> str:
    """The claim of up to ``limit`` jobs (``UPDATE ... RETURNING id``); its parameters are
    the lease's expiry, the attempt's start, ``updated_at`` and the due time."""
    return (
        "UPDATE kickside_job SET state = 'executing', attempt = attempt + 1, "
        f"lease_owner = 'bench', lease_token = {d['token']}, lease_expires_at = {d['mark']}, "
        f"attempted_at = {d['mark']}, updated_at = {d['mark']} WHERE id IN (SELECT id FROM "
        "kickside_job WHERE state = 'available' AND queue = 'default' AND scheduled_at <= "
        f"{d['mark']} ORDER BY priority, scheduled_at, id LIMIT {limit}) RETURNING id"
    )


def writes_sql(d: dict[str, str], ids: str) -> dict[str, str]:
    """The statements of one batch whose ids are ``ids`` (placeholders)."""
    m = d["mark"]
    return {
        "start_runs": (
            "INSERT INTO kickside_job_run (job_id, attempt, queue, worker, node, lease_token, "
            f"started_at) SELECT id, attempt, queue, worker, 'bench', lease_token, {m} "
            f"FROM kickside_job WHERE id IN ({ids})"
        ),
        "whole_runs": (
            "INSERT INTO kickside_job_run (job_id, attempt, queue, worker, node, lease_token, "
            "started_at, finished_at, duration_ms, outcome) SELECT id, attempt, queue, worker, "
            f"'bench', lease_token, attempted_at, {m}, 1, 'completed' "
            f"FROM kickside_job WHERE id IN ({ids})"
        ),
        "settle": (
            f"UPDATE kickside_job SET state = 'completed', completed_at = {m}, "
            f"finalized_at = {m}, lease_owner = NULL, lease_token = NULL, "
            f"lease_expires_at = NULL, updated_at = {m} WHERE id IN ({ids})"
        ),
        "finish_runs": (
            f"UPDATE kickside_job_run SET finished_at = {m}, duration_ms = 1, "
            f"outcome = 'completed' WHERE finished_at IS NULL AND job_id IN ({ids})"
        ),
    }


def drain(
    execute: Callable[[str, Sequence[Any]], list[Any]],
    transaction: Callable[[], Any],
    d: dict[str, str],
    variant: str,
) -> int:
    """Drain every available job with ``variant``'s writes; how many jobs."""
    for change in CHANGES[variant]:
        with transaction():
            execute(change, ())
    now, claim, done = d["now"], claim_sql(d), 0
    while True:
        with transaction():
            ids = [row[0] for row in execute(claim, (now, now, now, d["due"]))]
            if not ids:
                return done
            writes = writes_sql(d, ",".join([d["mark"]] * len(ids)))
            if variant not in ("no_runs", "runs_at_settle"):
                execute(writes["start_runs"], (now, *ids))
        with transaction():
            if variant == "runs_at_settle":  # before the settle clears the lease token
                execute(writes["whole_runs"], (now, *ids))
            execute(writes["settle"], (now, now, now, *ids))
            if variant not in ("no_runs", "runs_at_settle"):
                execute(writes["finish_runs"], (now, *ids))
        done += len(ids)


def _enqueue(target: Target, jobs: int) -> None:
    db = target.open()
    try:
        enqueue_fanout(db, JobBuilder("noop"), [{"i": i} for i in range(jobs)])
    finally:
        db.dispose()


def measure_sqlite(variant: str, jobs: int) -> dict[str, float]:
    """One round on a fresh SQLite file: µs of wall time per job."""
    with sqlite_target() as target:
        _enqueue(target, jobs)
        conn = sqlite3.connect(target.url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")

        @contextmanager
        def transaction() -> Iterator[None]:
            conn.execute("BEGIN IMMEDIATE")
            yield
            conn.execute("COMMIT")

        def execute(sql: str, params: Sequence[Any]) -> list[Any]:
            return conn.execute(sql, params).fetchall()

        started = time.perf_counter()
        done = drain(execute, transaction, SQLITE, variant)
        elapsed = time.perf_counter() - started
        conn.close()
    _check(variant, done, jobs)
    return {"wall": elapsed / done * 1e6}


def measure_postgresql(variant: str, jobs: int, url: str) -> dict[str, float]:
    """One round in a fresh schema: µs per job of wall time and of the server process's CPU."""
    with postgresql_target(url, f"bench_write_cost_{os.getpid()}") as target:
        _enqueue(target, jobs)
        # The planner setting of the pool's turn connections (open_turn_connection): on tables
        # never analysed, a claim planned otherwise reads and sorts every job.
        options = f"-c search_path={target.schema} -c enable_seqscan=off"
        with psycopg.connect(conninfo(url), options=options) as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            conn.commit()
            backend = row[0] if Path(f"/proc/{row[0]}/stat").exists() else None

            def execute(sql: str, params: Sequence[Any]) -> list[Any]:
                cur = conn.execute(sql, params)
                return cur.fetchall() if cur.description else []

            cpu0 = process_tree_cpu_seconds(backend) if backend else 0.0
            started = time.perf_counter()
            done = drain(execute, conn.transaction, POSTGRESQL, variant)
            elapsed = time.perf_counter() - started
            cpu = process_tree_cpu_seconds(backend) - cpu0 if backend else float("nan")
    _check(variant, done, jobs)
    return {"wall": elapsed / done * 1e6, "server_cpu": cpu / done * 1e6}


def _check(variant: str, done: int, jobs: int) -> None:
    if done != jobs:
        raise RuntimeError(f"{variant}: drained {done} of {jobs} jobs")


def main(argv: list[str] | None = None) -> int:
    """Measure each variant ``--rounds`` times, alternately; print the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.write_cost")
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--database-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("variants", nargs="*", metavar="VARIANT", help=", ".join(VARIANTS))
    args = parser.parse_args(argv)
    variants = args.variants or [
        v for v in VARIANTS if args.backend == "postgresql" or v not in POSTGRESQL_ONLY
    ]
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"unknown variant {unknown[0]!r}: choose from {', '.join(VARIANTS)}")
    if args.backend == "sqlite" and (only := POSTGRESQL_ONLY.intersection(variants)):
        parser.error(f"variant {sorted(only)[0]!r} is for PostgreSQL only")
    figures: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for variant in variants:
            if args.backend == "sqlite":
                figures[variant].append(measure_sqlite(variant, args.jobs))
            else:
                figures[variant].append(measure_postgresql(variant, args.jobs, args.database_url))
    metrics = list(figures[variants[0]][0])
    where = f"SQLite {sqlite3.sqlite_version}" if args.backend == "sqlite" else "PostgreSQL"
    print(f"{where}, {args.jobs} jobs in turns of {BATCH}, µs per job (median; rounds):")
    print("| variant | " + " | ".join(metrics) + " |")
    print("| --- |" + " ---: |" * len(metrics))
    for variant, each in figures.items():
        cells = []
        for m in metrics:
            rounds = ", ".join(f"{r[m]:.1f}" for r in each)
            cells.append(f"{statistics.median(r[m] for r in each):.1f} ({rounds})")
        print(f"| {variant} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
