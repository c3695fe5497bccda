"""What each part of a job's writes costs SQLite, measured on raw sqlite3 (issue 26).

``python -m bench.sqlite_write_cost [--jobs 20000] [--rounds 3] [VARIANT ...]`` migrates a fresh
file per round and variant, enqueues ``--jobs`` jobs with Kickside, then drains them on one
sqlite3 connection (WAL, synchronous NORMAL) with the statements a pool's turns run, in batches
of 200: the claim (``UPDATE ... RETURNING``), the run rows' insert, then the settle's job update
and run update, one transaction each for claiming and settling. No Python runs between the
statements beyond binding ids, so the figure is SQLite's own work per job. Variants change the
schema before the drain:

- ``base``: the schema as migrated;
- ``no_worker_state`` / ``worker_only``: without ``ix_kickside_job_worker_state``, or with an
  index on ``worker`` alone (which a state change does not touch);
- ``no_inserted_at``: without ``ix_kickside_job_inserted_at``;
- ``no_runs``: no run history at all (no run row inserted or updated).

Prints the median µs per job of each and every round's figure. The figures and what they mean
for issue 26 are in docs/about/performance.md.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from kickside_engine import Database, JobBuilder, enqueue_fanout, migrate

BATCH = 200
VARIANTS = ("base", "no_worker_state", "worker_only", "no_inserted_at", "no_runs")
#: Schema changes per variant, run before the drain.
CHANGES = {
    "base": (),
    "no_worker_state": ("DROP INDEX ix_kickside_job_worker_state",),
    "worker_only": (
        "DROP INDEX ix_kickside_job_worker_state",
        "CREATE INDEX ix_kickside_job_worker ON kickside_job (worker)",
    ),
    "no_inserted_at": ("DROP INDEX ix_kickside_job_inserted_at",),
    "no_runs": (),
}
NOW = "2026-12-03 12:00:00.000000"
CLAIM = (
    "UPDATE kickside_job SET state = 'executing', attempt = attempt + 1, lease_owner = 'bench', "
    "lease_token = lower(hex(randomblob(16))), lease_expires_at = :now, attempted_at = :now, "
    "updated_at = :now WHERE id IN (SELECT id FROM kickside_job WHERE state = 'available' "
    "AND queue = 'default' AND scheduled_at <= :due ORDER BY priority, scheduled_at, id "
    "LIMIT :limit) RETURNING id"
)


def enqueued_file(folder: Path, jobs: int) -> Path:
    """A migrated SQLite file in ``folder`` holding ``jobs`` available no-op jobs."""
    path = folder / "kickside.db"
    db = Database.from_url(f"sqlite:///{path}")
    try:
        migrate.upgrade(db)
        enqueue_fanout(db, JobBuilder("noop"), [{"i": i} for i in range(jobs)])
    finally:
        db.dispose()
    return path


def drain(path: Path, variant: str) -> tuple[float, int]:
    """Drain ``path`` as ``variant``; µs of wall time per job, and how many jobs."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    for change in CHANGES[variant]:
        conn.execute(change)
    runs = variant != "no_runs"
    done = 0
    started = time.perf_counter()
    while True:
        conn.execute("BEGIN IMMEDIATE")
        params = {"now": NOW, "due": "9999-12-31 00:00:00.000000", "limit": BATCH}
        ids = [row[0] for row in conn.execute(CLAIM, params).fetchall()]
        marks = ",".join("?" * len(ids))
        if ids and runs:
            conn.execute(
                "INSERT INTO kickside_job_run (job_id, attempt, queue, worker, node, lease_token, "
                "started_at) SELECT id, attempt, queue, worker, 'bench', lease_token, ? "
                f"FROM kickside_job WHERE id IN ({marks})",
                (NOW, *ids),
            )
        conn.execute("COMMIT")
        if not ids:
            break
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE kickside_job SET state = 'completed', completed_at = ?, finalized_at = ?, "
            "lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = ? "
            f"WHERE id IN ({marks})",
            (NOW, NOW, NOW, *ids),
        )
        if runs:
            conn.execute(
                "UPDATE kickside_job_run SET finished_at = ?, duration_ms = 1, "
                f"outcome = 'completed' WHERE finished_at IS NULL AND job_id IN ({marks})",
                (NOW, *ids),
            )
        conn.execute("COMMIT")
        done += len(ids)
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed / max(done, 1) * 1e6, done


def main(argv: list[str] | None = None) -> int:
    """Measure each variant ``--rounds`` times, alternately; print the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.sqlite_write_cost")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("variants", nargs="*", metavar="VARIANT", help=", ".join(VARIANTS))
    args = parser.parse_args(argv)
    variants = args.variants or list(VARIANTS)
    if unknown := [v for v in variants if v not in VARIANTS]:
        parser.error(f"unknown variant {unknown[0]!r}: choose from {', '.join(VARIANTS)}")
    figures: dict[str, list[float]] = {v: [] for v in variants}
    for _ in range(args.rounds):
        for variant in variants:
            with tempfile.TemporaryDirectory() as folder:
                us, done = drain(enqueued_file(Path(folder), args.jobs), variant)
            if done != args.jobs:
                raise RuntimeError(f"{variant}: drained {done} of {args.jobs} jobs")
            figures[variant].append(us)
    print(f"SQLite {sqlite3.sqlite_version}, {args.jobs} jobs in turns of {BATCH}, µs per job:")
    print("| variant | median | rounds |")
    print("| --- | ---: | --- |")
    for variant, each in figures.items():
        rounds = ", ".join(f"{x:.1f}" for x in each)
        print(f"| {variant} | {statistics.median(each):.1f} | {rounds} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
