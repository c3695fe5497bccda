"""`doctor`: one health report of a Kickside database, each finding ok, warn or fail."""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import BigInteger, cast, func, select, text

from kickside_engine import migrate
from kickside_engine.clock import ensure_aware
from kickside_engine.control.capacity import capacity_groups
from kickside_engine.control.consistency import find_inconsistencies
from kickside_engine.control.queues import list_nodes, list_queues, unserved_workers
from kickside_engine.errors import KicksideError
from kickside_engine.models import JobState
from kickside_engine.store.database import Database
from kickside_engine.store.notify import channel_name, wake_folder_of
from kickside_engine.store.sqlite_durability import KEEPS, mode_name
from kickside_engine.store.tables import state_literal
from kickside_engine.store.wake_sockets import is_subscription

Status = Literal["ok", "warn", "fail"]
RESCUE_GRACE = timedelta(seconds=10)
DEAD_TUPLE_WARN = 0.2


@dataclass(frozen=True)
class Finding:
    """One check's result."""

    check: str
    status: Status
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class HealthReport:
    """Every finding; ``ok`` when none needs attention."""

    findings: list[Finding]

    @property
    def ok(self) -> bool:
        return all(f.status == "ok" for f in self.findings)


def doctor(db: Database, now: datetime) -> HealthReport:
    """Check schema, nodes, leases, queues, capacity, stuck jobs, consistency, tables,
    durability (the commit mode in force) and wake-ups (NOTIFY, or SQLite's wake sockets)."""
    now = ensure_aware(now, "now")
    findings = [_schema(db)]
    if findings[0].status == "fail":
        return HealthReport(findings)
    checks = (
        _nodes, _leases, _queues, _workers, _capacity, _stuck, _consistency, _tables,
        _durability, _notify,
    )  # fmt: skip
    for check in checks:
        try:
            findings.append(check(db, now))
        except KicksideError as exc:
            findings.append(Finding(check.__name__.strip("_"), "fail", str(exc)))
    return HealthReport(findings)


def _schema(db: Database) -> Finding:
    try:
        st = migrate.status(db)
    except KicksideError as exc:
        try:  # a newer schema than this Kickside knows, which may still accept its code
            migrate.ensure_current(db)
        except KicksideError:
            return Finding("schema", "fail", str(exc))
        current = db.schema_revision
        return Finding(
            "schema",
            "warn",
            f"schema at {current}, newer than this Kickside knows (head "
            f"{migrate.head_revision()}), which it accepts: upgrade this Kickside",
            {"revision": current, "head": migrate.head_revision()},
        )
    if st.up_to_date:
        return Finding("schema", "ok", f"schema at {st.head}", {"revision": st.current})
    return Finding(
        "schema",
        "fail",
        f"schema at {st.current or 'nothing'}, need {st.head}: run `kickside migrate`",
        {"revision": st.current, "head": st.head},
    )


def _nodes(db: Database, now: datetime) -> Finding:
    nodes = list_nodes(db, now)
    stale = [n.name for n in nodes if n.stale]
    if stale:
        return Finding(
            "nodes",
            "warn",
            f"{len(stale)} node(s) with stale heartbeats: " + ", ".join(stale[:5]),
            {"stale": stale},
        )
    return Finding("nodes", "ok", f"{len(nodes)} live node(s)", {"live": len(nodes)})


def _leases(db: Database, now: datetime) -> Finding:
    job = db.tables.job
    with db.read() as conn:
        count = conn.execute(
            select(func.count())
            .select_from(job)
            .where(
                job.c.state == state_literal(JobState.EXECUTING),
                job.c.lease_expires_at < now - RESCUE_GRACE,
            )
        ).scalar_one()
    if count:
        return Finding(
            "leases",
            "warn",
            f"{count} expired lease(s) awaiting rescue (is any pool running the Lifeline?)",
            {"expired": count},
        )
    return Finding("leases", "ok", "no expired lease awaiting rescue")


def _queues(db: Database, now: datetime) -> Finding:
    orphaned = [q.name for q in list_queues(db, now, exact=False) if q.no_node]
    if orphaned:
        return Finding(
            "queues",
            "warn",
            "queue(s) with available jobs but no live node: " + ", ".join(orphaned),
            {"queues": orphaned},
        )
    return Finding("queues", "ok", "every queue with jobs has a live node")


def _workers(db: Database, now: datetime) -> Finding:
    unserved = unserved_workers(db, now)
    if unserved:
        return Finding(
            "workers",
            "warn",
            "jobs wait for a worker no running node has: "
            + "; ".join(f"{u.worker} in queue {u.queue} ({u.jobs} job(s))" for u in unserved[:5])
            + " (deploy the worker or fix the name)",
            {
                "unserved": [
                    {"queue": u.queue, "worker": u.worker, "jobs": u.jobs} for u in unserved
                ]
            },
        )
    return Finding("workers", "ok", "every waiting job's worker runs on a live node")


def _capacity(db: Database, now: datetime) -> Finding:
    bad = {g.group: g.problem for g in capacity_groups(db, now) if g.problem}
    if bad:
        return Finding(
            "capacity",
            "fail",
            "invalid capacity settings: " + "; ".join(f"{g}: {p}" for g, p in bad.items()),
            {"groups": bad},
        )
    return Finding("capacity", "ok", "capacity settings valid")


def _stuck(db: Database, now: datetime) -> Finding:
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(
            select(job.c.id, job.c.attempted_at, job.c.max_execution_ms)
            .where(
                job.c.state == state_literal(JobState.EXECUTING),
                job.c.max_execution_ms.is_not(None),
            )
            .limit(10_000)
        ).all()
    stuck = [
        str(r.id)
        for r in rows
        if r.attempted_at
        and now - r.attempted_at > timedelta(milliseconds=r.max_execution_ms) + RESCUE_GRACE
    ]
    if stuck:
        return Finding(
            "stuck",
            "warn",
            f"{len(stuck)} job(s) executing past their max execution",
            {"jobs": stuck[:20]},
        )
    return Finding("stuck", "ok", "no job past its max execution")


def _consistency(db: Database, now: datetime) -> Finding:
    problems = find_inconsistencies(db)
    if problems:
        return Finding(
            "consistency",
            "fail",
            "jobs in impossible states: "
            + "; ".join(f"{len(p.job_ids)} {p.description}" for p in problems),
            {p.check: [str(i) for i in p.job_ids] for p in problems},
        )
    return Finding("consistency", "ok", "every job and run is in a consistent state")


def _tables(db: Database, now: datetime) -> Finding:
    job = db.tables.job
    if not db.is_postgresql:
        with db.read() as conn:
            count = conn.execute(select(func.count()).select_from(job)).scalar_one()
        return Finding("tables", "ok", f"{count} job row(s)", {"jobs": count})
    with db.read() as conn:
        rows = conn.execute(
            text(
                "SELECT relname, n_live_tup, n_dead_tup, last_autovacuum, last_vacuum "
                "FROM pg_stat_user_tables WHERE schemaname = :s "
                "AND relname IN ('kickside_job', 'kickside_job_run')"
            ),
            {"s": db.schema or "public"},
        ).all()
        size = conn.execute(
            select(cast(func.pg_total_relation_size(str(job.fullname)), BigInteger))
        ).scalar_one()
    data: dict[str, Any] = {"job_table_bytes": size}
    warnings = []
    for name, live, dead, autovac, vac in rows:
        ratio = dead / max(1, live + dead)
        data[name] = {
            "live": live,
            "dead": dead,
            "dead_ratio": round(ratio, 3),
            "last_vacuum": max(filter(None, (autovac, vac)), default=None),
        }
        if ratio > DEAD_TUPLE_WARN and dead > 1000:
            warnings.append(f"{name} has {ratio:.0%} dead tuples (autovacuum lagging)")
    if warnings:
        return Finding("tables", "warn", "; ".join(warnings), data)
    return Finding("tables", "ok", f"job table {size / 1e6:.1f} MB", data)


def _durability(db: Database, now: datetime) -> Finding:
    """The commit mode of this handle's connections, read back from one of them."""
    with db.read() as conn:
        if db.is_postgresql:
            value = conn.execute(text("SHOW synchronous_commit")).scalar_one()
            status: Status = "ok" if value in ("on", "remote_write", "remote_apply") else "warn"
            return Finding(
                "durability",
                status,
                f"PostgreSQL synchronous_commit={value}",
                {"synchronous_commit": value},
            )
        mode = mode_name(int(conn.execute(text("PRAGMA synchronous")).scalar_one()))
    keeps = KEEPS.get(mode, "unknown")
    return Finding(
        "durability",
        "warn" if mode == "off" else "ok",
        f"SQLite synchronous={mode.upper()}: {keeps}",
        {"synchronous": mode},
    )


def _notify(db: Database, now: datetime) -> Finding:
    if not db.is_postgresql:
        folder = wake_folder_of(db)
        names = list(folder.glob("*.sock")) if folder is not None and folder.is_dir() else []
        listeners = sum(1 for name in names if is_subscription(name))
        pools = len(names) - listeners
        return Finding(
            "notify",
            "ok",
            f"SQLite: {pools} pool(s) and {listeners} subscription(s) listening on wake "
            "sockets beside the file, polling as the fallback",
            {"wake_folder": str(folder), "sockets": len(names), "subscriptions": listeners},
        )
    raw = db.engine.raw_connection()
    conn = raw.driver_connection
    try:
        assert conn is not None
        conn.autocommit = True
        channel = f"{channel_name(db)}_doctor"
        token = uuid.uuid4().hex
        conn.execute(f'LISTEN "{channel}"')
        started = time.monotonic()
        conn.execute("SELECT pg_notify(%s, %s)", (channel, token))
        for notify in conn.notifies(timeout=2.0):
            if notify.payload == token:
                ms = (time.monotonic() - started) * 1000
                return Finding(
                    "notify",
                    "ok",
                    f"LISTEN/NOTIFY round trip {ms:.1f} ms",
                    {"round_trip_ms": round(ms, 2)},
                )
        return Finding("notify", "fail", "a NOTIFY was not delivered within 2 s")
    finally:
        with contextlib.suppress(Exception):
            conn.execute(f'UNLISTEN "{channel_name(db)}_doctor"')  # type: ignore[union-attr]
            conn.autocommit = False  # type: ignore[union-attr]
        raw.close()
