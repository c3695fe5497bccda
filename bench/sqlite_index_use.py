"""Which index of ``kickside_job`` each hot-path query uses on SQLite (issue 26).

``python -m bench.sqlite_index_use [--markdown]`` migrates a fresh SQLite file, captures every
statement that reads or writes ``kickside_job`` (a ``before_cursor_execute`` listener, with
its parameters, and SQLite's statement trace for those run on sqlite3 directly, with their
values written in) while the real code runs: enqueues (single, many, unique, concurrency-keyed,
scheduled), a pool in this process claiming, recording outcomes and renewing leases, the
Stager, the Lifeline, the Pruner and the dashboard's reads. Each statement is labelled by the
part of Kickside that issued it (from the call stack) and run again under
``EXPLAIN QUERY PLAN`` on the same file, with the same parameters.

It prints every index of ``kickside_job`` (``PRAGMA index_list``: columns, partial ``WHERE``)
with the statements whose plan uses it, then the statements whose plan reads the table with no
index. The table in docs/operating/sqlite.md ("Which index each query needs") is its
``--markdown`` output.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import tempfile
import threading
import time
import traceback
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import event

from bench.peers.sqlite_trace import shape
from kickside_engine import (
    Database,
    JobBuilder,
    JobState,
    Unique,
    WorkerRegistry,
    enqueue,
    enqueue_many,
    get_job,
    migrate,
)
from kickside_engine.clock import utcnow
from kickside_engine.plugins.lifeline import rescue_expired
from kickside_engine.plugins.pruner import prune
from kickside_engine.plugins.stager import stage
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.workers import CapacityDeclaration

TABLE = "kickside_job"
_MENTIONS = re.compile(rf"\b{TABLE}\b(?!_)")
_INDEX = re.compile(r"USING (?:COVERING )?INDEX (\w+)(?: \((.*)\))?")
_SCAN = re.compile(r"^SCAN (\w+)(?: |$)")

#: The part of Kickside a statement came from: the first of these modules on its call stack,
#: in this order (a plugin calls store functions; the dashboard calls control functions).
PARTS = (
    ("plugins/stager.py", "Stager"),
    ("plugins/lifeline.py", "Lifeline"),
    ("plugins/pruner.py", "Pruner"),
    ("plugins/cron.py", "Cron"),
    ("kickside_tui/", "dashboard"),
    ("kickside_engine/control/", "dashboard"),
    ("store/claims.py", "claim"),
    ("store/keyed_claims.py", "claim"),
    ("store/rate_windows.py", "claim"),
    ("store/settle.py", "settle"),
    ("store/leases.py", "leases"),
    ("store/workflows.py", "settle"),
    ("store/inserts.py", "enqueue"),
    ("kickside_engine/enqueue.py", "enqueue"),
    ("kickside_engine/builder.py", "enqueue"),
    ("store/nodes.py", "heartbeat"),
    ("kickside_engine/api.py", "API"),
)
#: Frames that only carry a statement (never named as its caller).
_CARRIERS = (
    "store/database.py",
    "store/engines.py",
    "store/notify.py",
    "store/sqlite_driver.py",
    "store/sqlite_batches.py",
    "store/claim_statement.py",
    "store/driver_rows.py",
    "contextlib.py",
)

registry = WorkerRegistry()


@registry.worker("ok")
def ok(args: dict[str, Any], job: Any) -> None:
    """Done at once."""


@registry.worker("fails_once", max_attempts=3)
def fails_once(args: dict[str, Any], job: Any) -> None:
    """Fails its first attempt: a retry, scheduled by the backoff (the Stager's work)."""
    if job.attempt == 1:
        raise RuntimeError("first attempt fails")


@registry.worker(
    "grouped", capacity=CapacityDeclaration(group="reports", settings_namespace="reports")
)
def grouped(args: dict[str, Any], job: Any) -> None:
    """In a capacity group with no limits set: the claim reads the group, admits nothing."""


@registry.worker("slow")
def slow(args: dict[str, Any], job: Any) -> None:
    """Runs until its lease is taken away (the Lifeline's work)."""
    time.sleep(float(args.get("seconds", 5)))


class Capture:
    """The statements on ``kickside_job``, each with the first parameters seen and who ran it."""

    def __init__(self) -> None:
        self.statements: dict[tuple[str, str], tuple[str, Any]] = {}
        self._lock = threading.Lock()

    def __call__(
        self, _conn: Any, _cursor: Any, statement: str, parameters: Any, _ctx: Any, many: bool
    ) -> None:
        if not _MENTIONS.search(statement) or statement.lstrip().upper().startswith("EXPLAIN"):
            return
        part, caller = _who(traceback.extract_stack())
        params = parameters[0] if many and parameters else parameters
        with self._lock:
            self.statements.setdefault((part, statement), (caller, params))


class DriverCapture:
    """The statements on ``kickside_job`` that skip SQLAlchemy's execution events (the pool's
    turn and the single enqueue run on sqlite3 directly), from SQLite's own statement trace on
    every connection the engine's pool hands out: each with its values written in, one per
    shape and part of Kickside."""

    def __init__(self, into: Capture) -> None:
        self.into = into
        self._shapes: set[tuple[str, str]] = set()

    def checkout(self, dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        dbapi_conn.set_trace_callback(self.trace)

    def checkin(self, dbapi_conn: Any, _record: Any) -> None:
        if dbapi_conn is not None:
            dbapi_conn.set_trace_callback(None)

    def trace(self, statement: str) -> None:
        if not _MENTIONS.search(statement) or statement.lstrip().upper().startswith("EXPLAIN"):
            return
        part, caller = _who(traceback.extract_stack())
        key = (part, shape(statement))
        with self.into._lock:
            if key not in self._shapes:
                self._shapes.add(key)
                self.into.statements.setdefault((part, statement), (caller, None))


def _who(stack: traceback.StackSummary) -> tuple[str, str]:
    files = [frame.filename.replace("\\", "/") for frame in stack]
    part = next((label for marker, label in PARTS if any(marker in f for f in files)), "other")
    caller = "?"
    for frame in reversed(stack):  # innermost first
        name = frame.filename.replace("\\", "/")
        if "kickside_engine/" in name and not name.endswith(_CARRIERS):
            caller = frame.name
            break
    return part, caller


def _wait(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def _state(db: Database, job_id: Any) -> JobState | None:
    job = get_job(db, job_id)
    return job.state if job is not None else None


def run_workload(db: Database) -> None:
    """Enqueue, run a pool, then the Stager, the Lifeline, the Pruner and the dashboard."""
    plain = [enqueue(db, JobBuilder("ok", {"i": i})).id for i in range(5)]
    enqueue_many(db, [JobBuilder("ok", {"many": i}) for i in range(20)])
    enqueue(db, JobBuilder("ok", {"u": 1}).unique(Unique.args()))
    enqueue(db, JobBuilder("ok", {"u": 1}).unique(Unique.args()))  # the duplicate is found
    enqueue(db, JobBuilder("ok", {"k": 1}).concurrency_key("tenant-1"))
    enqueue(db, JobBuilder("ok", {"slot": 1}).slot("tenants", "sync", "acme"))
    enqueue(db, JobBuilder("ok", {"slot": 1}).slot("tenants", "sync", "acme"))  # found
    enqueue(db, JobBuilder("grouped", {}).concurrency_key("tenant-2"))
    later = enqueue(db, JobBuilder("ok", {"later": 1}).schedule_in(timedelta(seconds=1))).id
    retried = enqueue(db, JobBuilder("fails_once", {})).id
    pool = WorkerPool(
        db,
        PoolConfig(
            queues={"default": 4},
            registry=registry,
            mode="thread",
            poll_interval=0.2,
            lease=timedelta(seconds=30),
        ),
    )
    pool.start()
    try:
        _wait(lambda: all(_state(db, j) is JobState.COMPLETED for j in plain), "the jobs")
        _wait(lambda: _state(db, retried) is JobState.RETRYABLE, "the failed first attempt")
        time.sleep(1.2)
        stage(db, utcnow())  # the scheduled job is due (the pool's own Stager may be first)
        _wait(lambda: _state(db, later) is JobState.COMPLETED, "the staged job")
        stuck = enqueue(db, JobBuilder("slow", {"seconds": 3}).concurrency_key("tenant-3")).id
        _wait(lambda: _state(db, stuck) is JobState.EXECUTING, "the slow job to start")
        # Same key: it waits for the first (the dashboard explains why).
        behind = enqueue(db, JobBuilder("slow", {"seconds": 0}).concurrency_key("tenant-3")).id
        _dashboard(db, plain[0], behind)
        time.sleep(1.5)  # a lease renewal check or two
        rescue_expired(db, utcnow() + timedelta(hours=1))  # as if its lease had run out
        _wait(lambda: _state(db, stuck) is not JobState.EXECUTING, "the rescue")
        prune(db, utcnow() + timedelta(days=30))
    finally:
        pool.stop()


def _dashboard(db: Database, job_id: Any, waiting: Any) -> None:
    """The dashboard's reads, through its own adapter."""
    from kickside_engine.control import JobFilter
    from kickside_tui.adapter import Adapter

    adapter = Adapter(db)
    now = utcnow()
    adapter.overview(now)
    adapter.jobs(JobFilter(), with_total=True)
    adapter.jobs(JobFilter(states=(JobState.AVAILABLE,)), with_total=True)
    adapter.jobs(JobFilter(queues=("default",), workers=("ok",)), with_total=True)
    adapter.search(JobFilter(search="many"))
    adapter.leases(now)
    adapter.metrics(now)
    adapter.health(now)
    adapter.ops(now)
    adapter.capacity(now)
    adapter.slots(now)
    adapter.job(waiting, now)  # why it waits: its key's holders
    adapter.job(job_id, now)


def indexes(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """``kickside_job``'s indexes as (name, "columns [WHERE ...]")."""
    found = []
    for _seq, name, unique, origin, partial in conn.execute(f"PRAGMA index_list({TABLE})"):
        columns = ", ".join(row[2] for row in conn.execute(f"PRAGMA index_info({name})"))
        text = f"({columns})"
        if unique:
            text = f"unique {text}" if origin != "pk" else f"primary key {text}"
        if partial:
            sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
            where = sql[0].split(" WHERE ", 1)[1] if sql and " WHERE " in sql[0] else "?"
            text += f" WHERE {where}"
        found.append((name, text))
    return sorted(found)


def _verb(statement: str) -> str:
    words = statement.split()
    verb = words[0].upper() if words else "?"
    if verb == "WITH":  # a CTE: the statement it leads to
        for word in words:
            if word.upper() in ("SELECT", "UPDATE", "INSERT", "DELETE"):
                verb = word.upper()
    return verb


def plans(path: Path, capture: Capture) -> tuple[dict[str, set[str]], set[str]]:
    """Per index, the statements whose plan uses it; and the statements that scan the table."""
    conn = sqlite3.connect(path)
    used: dict[str, set[str]] = defaultdict(set)
    scans: set[str] = set()
    own = {name for name, _ in indexes(conn)}
    try:
        for (part, statement), (caller, params) in sorted(capture.statements.items()):
            rows = conn.execute(f"EXPLAIN QUERY PLAN {statement}", params or ()).fetchall()
            what = f"{part}: `{caller}` {_verb(statement)}"
            aliases = set(re.findall(rf"\b{TABLE}\b(?!_)(?: AS)? (\w+)", statement))
            for row in rows:
                detail = row[-1]
                index = _INDEX.search(detail)
                if index and index.group(1) in own:
                    used[index.group(1)].add(f"{what} ({index.group(2) or 'scan'})")
                elif (
                    (scan := _SCAN.match(detail))
                    and scan.group(1) in ({TABLE} | aliases)
                    and "INDEX" not in detail
                ):
                    scans.add(what)
    finally:
        conn.close()
    return used, scans


def report(path: Path, used: dict[str, set[str]], scans: set[str], markdown: bool) -> str:
    conn = sqlite3.connect(path)
    try:
        listed = indexes(conn)
    finally:
        conn.close()
    lines: list[str] = []
    if markdown:
        lines += ["| index | columns | used by (part: caller statement (constraint)) |"]
        lines += ["| --- | --- | --- |"]
        for name, text in listed:
            users = "<br>".join(sorted(used.get(name, ()))) or "none of the captured statements"
            lines.append(f"| `{name}` | {text.replace('|', '/')} | {users} |")
        lines += ["", f"Statements that read `{TABLE}` with no index (a scan):", ""]
        lines += [f"- {s}" for s in sorted(scans)] or ["- none"]
    else:
        for name, text in listed:
            lines.append(f"{name}  {text}")
            lines += [f"    {u}" for u in sorted(used.get(name, ()))] or ["    (unused here)"]
        lines.append(f"scans of {TABLE} with no index:")
        lines += [f"    {s}" for s in sorted(scans)] or ["    none"]
    lines.append("")
    lines.append(f"{len(listed)} indexes on {TABLE}; SQLite {sqlite3.sqlite_version}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sqlite_index_use")
    parser.add_argument("--markdown", action="store_true", help="print the doc's table")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "index-use.sqlite3"
        db = Database.from_url(f"sqlite:///{path}")
        try:
            migrate.upgrade(db)
            capture = Capture()
            driver = DriverCapture(capture)
            db.engine.dispose()  # every connection from now on is checked out under the trace
            listeners = (
                ("before_cursor_execute", capture),
                ("checkout", driver.checkout),
                ("checkin", driver.checkin),
            )
            for name, fn in listeners:
                event.listen(db.engine, name, fn)
            run_workload(db)
            for name, fn in listeners:
                event.remove(db.engine, name, fn)
        finally:
            db.dispose()
        used, scans = plans(path, capture)
        print(report(path, used, scans, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
