"""What a SQLite single enqueue costs SQLite itself, for Kickside's row on several schemas and
for Huey's (issue 26's single-enqueue line).

``python -m bench.enqueue_floor [--rows 5000] [--rounds 5] [VARIANT ...]`` creates a fresh
SQLite file per round and variant (WAL, ``synchronous=NORMAL``, Kickside's connection
settings), builds ``--rows`` rows before the clock starts, then runs each row's INSERT as one
``execute`` that commits by itself on sqlite3: no Python of Kickside's around it, the way
``bench.machine``'s ``sqlite_enqueue`` ceiling runs. Variants, alternated round by round:

- ``kickside``: Kickside's statement (``single_insert_statement``, which the engine itself
  sends) into the migrated ``kickside_job``: the table, its primary key on ``id``, and the full
  indexes ``ix_kickside_job_fetch`` (the claim's order), ``ix_kickside_job_worker_state`` and
  ``ix_kickside_job_inserted_at`` (the dashboard's worker filter and newest-first pages);
- ``claim_only``: the same without the two dashboard indexes: what the contract itself needs
  of a new job's writes (the row, finding it by id, claiming it in order);
- ``without_rowid``: ``claim_only`` on a ``WITHOUT ROWID`` table keyed by ``id``, so the row
  and its id are one B-tree (SQLite advises against it for rows this wide);
- ``huey``: Huey's statement into Huey's schema (``SqliteStorage``: four columns, one index),
  with a blob the size of a no-op task Huey pickles. The floor of Huey's own enqueue.

For each it prints the median µs per enqueue, with every round's, and the WAL frames each
commit wrote (checkpoints off while timing). On Linux each frame is two ``pwrite`` calls (its
header, then the page) beside a fixed handful of ``fcntl`` locks per transaction, so the frames
a commit writes set most of its cost. The figures and what they mean are in
docs/about/performance.md.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.targets import sqlite_target
from kickside_engine import JobBuilder
from kickside_engine.clock import utcnow
from kickside_engine.job_row import build_row
from kickside_engine.store.database import Database
from kickside_engine.store.inserts import single_insert_statement

VARIANTS = ("kickside", "claim_only", "without_rowid", "huey")
DASHBOARD_INDEXES = ("ix_kickside_job_worker_state", "ix_kickside_job_inserted_at")
#: Huey 3.5's ``SqliteStorage`` schema and its enqueue.
HUEY_SCHEMA = (
    "CREATE TABLE task (id INTEGER NOT NULL PRIMARY KEY, queue TEXT NOT NULL, "
    "data BLOB NOT NULL, priority REAL NOT NULL DEFAULT 0.0)",
    "CREATE INDEX task_priority_id ON task (priority DESC, id ASC)",
)
HUEY_INSERT = "INSERT INTO task (queue, data, priority) VALUES (?, ?, ?)"
#: About the size of a no-op task as Huey pickles it (its id, name, args and options).
HUEY_BLOB_BYTES = 180
WAL_FRAME_HEADER = 24

Rows = list[tuple[str, Any]]


def _kickside_rows(db: Database, rows: int) -> Rows:
    options = JobBuilder("noop", {}).options
    return [single_insert_statement(db, build_row(options, utcnow())) for _ in range(rows)]


def _without_rowid(conn: sqlite3.Connection) -> None:
    """Rebuild ``kickside_job`` as a WITHOUT ROWID table keyed by id, with the claim's index and
    the partial ones (none of which a new no-op job enters)."""
    (table_sql,) = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'kickside_job'"
    ).fetchone()
    indexes = [
        sql
        for (name, sql) in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' "
            "AND tbl_name = 'kickside_job' AND sql IS NOT NULL"
        )
        if name not in DASHBOARD_INDEXES
    ]
    conn.execute("PRAGMA foreign_keys=OFF")
    conn.execute("DROP TABLE kickside_job")
    conn.execute(table_sql.rstrip().rstrip(";") + " WITHOUT ROWID")
    for sql in indexes:
        conn.execute(sql)
    conn.execute("PRAGMA foreign_keys=ON")


def _connect(path: str) -> sqlite3.Connection:
    """A sqlite3 connection in autocommit mode, WAL, ``synchronous=NORMAL``."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def prepare(variant: str, url: str, rows: int) -> tuple[sqlite3.Connection, Rows]:
    """A connection on a fresh file set up for ``variant``, and the rows to insert."""
    path = url.removeprefix("sqlite:///")
    if variant == "huey":
        conn = _connect(path)
        for sql in HUEY_SCHEMA:
            conn.execute(sql)
        blob = os.urandom(HUEY_BLOB_BYTES)
        return conn, [(HUEY_INSERT, ("bench", blob, 0.0)) for _ in range(rows)]
    db = Database.from_url(url)  # migrated by sqlite_target
    try:
        built = _kickside_rows(db, rows)
    finally:
        db.dispose()
    conn = _connect(path)
    conn.execute("PRAGMA foreign_keys=ON")
    if variant in ("claim_only", "without_rowid"):
        for name in DASHBOARD_INDEXES:
            conn.execute(f"DROP INDEX {name}")
    if variant == "without_rowid":
        _without_rowid(conn)
    return conn, built


def measure(variant: str, rows: int) -> dict[str, float]:
    """One round of ``variant`` on a fresh file: µs per enqueue, WAL frames per commit."""
    with sqlite_target() as target:
        conn, built = prepare(variant, target.url, rows)
        wal = Path(target.url.removeprefix("sqlite:///") + "-wal")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        execute: Callable[..., Any] = conn.execute
        started = time.perf_counter()
        for sql, params in built:
            execute(sql, params)
        elapsed = time.perf_counter() - started
        frames = wal.stat().st_size / (page_size + WAL_FRAME_HEADER)
        conn.close()
    return {"us": elapsed / rows * 1e6, "frames": frames / rows}


def main(argv: list[str] | None = None) -> int:
    """Measure each variant ``--rounds`` times, alternately; print the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.enqueue_floor")
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("variants", nargs="*", metavar="VARIANT", help=", ".join(VARIANTS))
    args = parser.parse_args(argv)
    variants = args.variants or list(VARIANTS)
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"unknown variant {unknown[0]!r}: choose from {', '.join(VARIANTS)}")
    figures: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for variant in variants:
            figures[variant].append(measure(variant, args.rows))
    print(
        f"SQLite {sqlite3.sqlite_version}, WAL, synchronous NORMAL: {args.rows} single-row "
        "commits a round, median (rounds)"
    )
    print("| variant | µs an enqueue | WAL frames a commit |")
    print("| --- | ---: | ---: |")
    for variant, each in figures.items():
        us = ", ".join(f"{r['us']:.1f}" for r in each)
        frames = statistics.median(r["frames"] for r in each)
        us_median = statistics.median(r["us"] for r in each)
        print(f"| {variant} | {us_median:.1f} ({us}) | {frames:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
