"""Issue 26's work per job on SQLite: what the database does for one job, phase by phase.

On the run's SQLite file (no pool running), ``n`` no-op jobs are enqueued one commit each
(``JobBuilder(...).insert``), then claimed in batches of 10 (``claim``, as a pool at
concurrency 10 does) and settled (``record``, one transaction per batch). SQLAlchemy events
on the engine count, per phase and per job: the statements sent (``before_cursor_execute``,
transaction control left out),
split into reads and writes, the rows they wrote (SQLite's ``total_changes`` from each
transaction's ``begin`` event to its ``commit``), and the commits. Huey's side
(``bench.peers.huey_peer``) counts the same with SQLite's own statement trace on its
connection.

fsyncs are not counted by the harness: in WAL mode SQLite fsyncs the WAL once per commit at
``synchronous=FULL`` (a commit that wrote nothing writes no WAL frame) and never per commit
at NORMAL (only when a checkpoint copies the WAL back, by default every 1,000 pages), so
``fsyncs_per_job_full`` is the writing commits per job and ``fsyncs_per_job_normal`` is 0
plus the checkpoints' share. The indexes each table carries
(every row inserted writes one entry in each) are listed from ``sqlite_master``.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import event, text

from bench.targets import reset
from bench.workloads.common import Context, Measurement
from kickside_engine import JobBuilder, claim, record
from kickside_engine.clock import utcnow
from kickside_engine.lifecycle import ExecutionResult, ResultKind

WORK_JOBS = 2_000
BATCH = 10
PHASES = ("enqueue", "claim", "settle")
#: A statement that writes (the claim's ``WITH ... UPDATE ... RETURNING`` too).
WRITE = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
#: Transaction control (the engine's own ``BEGIN IMMEDIATE``): commits are counted apart.
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK")


class Counter:
    """Statements, writes, rows written and commits seen on one engine, for the phase in force.

    Rows written are SQLite's ``total_changes`` on the connection from a transaction's begin
    to its commit (a ``RETURNING`` statement's ``rowcount`` is not known when it runs).
    """

    def __init__(self) -> None:
        self.phase = ""
        self.counts: dict[str, dict[str, float]] = {
            p: {"statements": 0, "writes": 0, "rows_written": 0, "commits": 0, "writing_commits": 0}
            for p in PHASES
        }
        self.sql: dict[str, set[str]] = {p: set() for p in PHASES}
        self.began: dict[int, int] = {}

    def before(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if self.phase and not statement.lstrip().upper().startswith(CONTROL):
            self.counts[self.phase]["statements"] += 1
            self.counts[self.phase]["writes"] += bool(WRITE.search(statement))
            self.sql[self.phase].add(" ".join(statement.split())[:120])

    def begin(self, conn: Any) -> None:
        driver = conn.connection.driver_connection
        self.began[id(driver)] = driver.total_changes

    def commit(self, conn: Any) -> None:
        driver = conn.connection.driver_connection
        rows = driver.total_changes - self.began.pop(id(driver), driver.total_changes)
        if self.phase:
            self.counts[self.phase]["commits"] += 1
            self.counts[self.phase]["writing_commits"] += rows > 0
            self.counts[self.phase]["rows_written"] += rows


def work_per_job(ctx: Context) -> Measurement:
    """Statements, writes, rows written and commits per job for enqueue, claim and settle."""
    if ctx.target.backend != "sqlite":
        raise ValueError("work_per_job measures SQLite")
    n = ctx.count(WORK_JOBS, minimum=BATCH)
    db = ctx.target.open()
    counter = Counter()
    listeners = (
        ("before_cursor_execute", counter.before),
        ("begin", counter.begin),
        ("commit", counter.commit),
    )
    try:
        reset(db)
        for name, fn in listeners:
            event.listen(db.engine, name, fn)
        counter.phase = "enqueue"
        for _ in range(n):
            JobBuilder("noop", {}).insert(db)
        done = 0
        while True:
            counter.phase = "claim"
            batch = claim(db, queue="default", node="bench:work", limit=BATCH)
            if not batch:
                break
            counter.phase = "settle"
            finished = utcnow()
            record(db, [(c, ExecutionResult(ResultKind.DONE, finished, 0)) for c in batch])
            done += len(batch)
        counter.phase = ""
        if done != n:
            raise RuntimeError(f"claimed {done} jobs, expected {n}")
        with db.engine.connect() as conn:
            mode = int(conn.execute(text("PRAGMA synchronous")).scalar_one())
            indexes = conn.execute(
                text(
                    "SELECT tbl_name, name FROM sqlite_master WHERE type = 'index' "
                    "AND tbl_name LIKE 'kickside_job%' ORDER BY tbl_name, name"
                )
            ).all()
    finally:
        for name, fn in listeners:
            if event.contains(db.engine, name, fn):
                event.remove(db.engine, name, fn)
        reset(db)
        db.dispose()
    metrics: dict[str, float] = {}
    for phase in PHASES:
        for key, value in counter.counts[phase].items():
            metrics[f"{phase}_{key}_per_job"] = value / n
    metrics.update(
        statements_per_job=sum(metrics[f"{p}_statements_per_job"] for p in PHASES),
        rows_written_per_job=sum(metrics[f"{p}_rows_written_per_job"] for p in PHASES),
        commits_per_job=sum(counter.counts[p]["commits"] for p in PHASES) / n,
        fsyncs_per_job_full=sum(counter.counts[p]["writing_commits"] for p in PHASES) / n,
        fsyncs_per_job_normal=0.0,
    )
    by_table: dict[str, list[str]] = {}
    for table, name in indexes:
        by_table.setdefault(table, []).append(name)
    return Measurement(
        workload="work_per_job",
        backend="sqlite",
        params={"jobs": n, "claim_batch": BATCH},
        metrics=metrics,
        details={
            "counted_with": "SQLAlchemy events (before_cursor_execute, begin, commit)",
            "synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(mode, str(mode)),
            "indexes": by_table,
            "statements": {p: sorted(counter.sql[p]) for p in PHASES},
            "fsyncs": "derived, not counted: in WAL mode a commit that wrote pages fsyncs the WAL "
            "once at FULL, never at NORMAL (only checkpoints fsync)",
        },
    )
