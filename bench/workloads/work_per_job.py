"""Issue 26's work per job on SQLite: what the database does for one job, phase by phase.

On the run's SQLite file (no pool running), ``n`` no-op jobs are enqueued one commit each
(``JobBuilder(...).insert``), then claimed in batches of 10 (``claim``, as a pool at
concurrency 10 does) and settled (``record``, one transaction per batch). SQLite's own
statement trace on every connection the engine's pool hands out counts, per phase and per
job, the statements (transaction control left out; a single enqueue goes to the driver
without SQLAlchemy, which its events would not see), split into reads and writes, the rows
they wrote (``total_changes`` from checkout to checkin) and the commits
(:class:`bench.peers.sqlite_trace.StatementTrace`: Huey's side, ``bench.peers.huey_peer``,
counts with the same class on its connection).

fsyncs are not counted by the harness: in WAL mode SQLite fsyncs the WAL once per commit at
``synchronous=FULL`` (a commit that wrote nothing writes no WAL frame) and never per commit
at NORMAL (only when a checkpoint copies the WAL back, by default every 1,000 pages), so
``fsyncs_per_job_full`` is the writing commits per job and ``fsyncs_per_job_normal`` is 0
plus the checkpoints' share. The indexes each table carries
(every row inserted writes one entry in each) are listed from ``sqlite_master``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, text

from bench.peers.sqlite_trace import COUNTED_WITH, FSYNCS, StatementTrace, indexes_by_table
from bench.targets import reset
from bench.workloads.common import Context, Measurement
from kickside_engine import JobBuilder, claim, record
from kickside_engine.clock import utcnow
from kickside_engine.lifecycle import ExecutionResult, ResultKind

WORK_JOBS = 2_000
BATCH = 10


class PooledTrace:
    """A :class:`StatementTrace` on every connection the engine's pool hands out, and the rows
    each checkout wrote (``total_changes`` from checkout to checkin) for the phase in force."""

    def __init__(self) -> None:
        self.trace = StatementTrace()
        self._rows_at: dict[int, int] = {}

    def checkout(self, dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        self.trace.attach(dbapi_conn)
        self._rows_at[id(dbapi_conn)] = dbapi_conn.total_changes

    def checkin(self, dbapi_conn: Any, _record: Any) -> None:
        if dbapi_conn is None:
            return
        self.trace.detach(dbapi_conn)
        began = self._rows_at.pop(id(dbapi_conn), dbapi_conn.total_changes)
        if self.trace.phase:
            self.trace.add_rows(self.trace.phase, dbapi_conn.total_changes - began)


def work_per_job(ctx: Context) -> Measurement:
    """Statements, writes, rows written and commits per job for enqueue, claim and settle."""
    if ctx.target.backend != "sqlite":
        raise ValueError("work_per_job measures SQLite")
    n = ctx.count(WORK_JOBS, minimum=BATCH)
    db = ctx.target.open()
    pooled = PooledTrace()
    trace = pooled.trace
    listeners = (("checkout", pooled.checkout), ("checkin", pooled.checkin))
    try:
        reset(db)
        db.engine.dispose()  # every connection from now on is checked out under the trace
        for name, fn in listeners:
            event.listen(db.engine, name, fn)
        trace.phase = "enqueue"
        for _ in range(n):
            JobBuilder("noop", {}).insert(db)
        done = 0
        while True:
            trace.phase = "claim"
            batch = claim(db, queue="default", node="bench:work", limit=BATCH)
            if not batch:
                break
            trace.phase = "settle"
            finished = utcnow()
            record(db, [(c, ExecutionResult(ResultKind.DONE, finished, 0)) for c in batch])
            done += len(batch)
        trace.phase = ""
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
        trace.phase = ""
        for name, fn in listeners:
            if event.contains(db.engine, name, fn):
                event.remove(db.engine, name, fn)
        reset(db)
        db.dispose()
    return Measurement(
        workload="work_per_job",
        backend="sqlite",
        params={"jobs": n, "claim_batch": BATCH},
        metrics=trace.metrics(n),
        details={
            "counted_with": COUNTED_WITH,
            "synchronous": {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(mode, str(mode)),
            "indexes": indexes_by_table(indexes),
            "statements": trace.statements(),
            "fsyncs": FSYNCS,
        },
    )
