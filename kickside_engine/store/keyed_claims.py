"""Claims for jobs with a ``concurrency_key``: single-flight per key, and capacity groups.

A job whose worker declares a capacity group is admitted while the group's executing jobs stay
below its ``global_limit`` and the key's below its ``concurrency_key_limit``, both read from
``kickside_setting`` now (never cached between claims). Missing or invalid settings refuse
admission; they never lift the limit. A keyed job without a group is single-flight: at most one
executing job per key.

Admission is decided and the jobs claimed in one transaction. On PostgreSQL, transaction-level
advisory locks (taken in one global order) serialise claimers deciding for the same group or
key; SQLite's single writer serialises them already.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select, text

from kickside_engine.clock import utcnow
from kickside_engine.models import ClaimedJob, JobState
from kickside_engine.settings import limit_value
from kickside_engine.store.claims import claim_jobs
from kickside_engine.store.database import Database

CANDIDATE_WINDOW = 200


def queue_is_paused(db: Database, conn: Connection, queue: str) -> bool:
    """Whether ``queue`` is paused (shared by every node)."""
    q = db.tables.queue
    paused = conn.execute(select(q.c.paused).where(q.c.name == queue)).scalar_one_or_none()
    return bool(paused)


def _lock_id(kind: str, name: str) -> int:
    digest = hashlib.blake2b(f"kickside:{kind}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass(frozen=True)
class GroupLimits:
    """A capacity group's limits as read now; ``problem`` says why admission is refused."""

    global_limit: int | None
    per_key_limit: int | None
    problem: str | None


def read_group_limits(conn: Connection, db: Database, declaration: dict[str, Any]) -> GroupLimits:
    """Read a group's limits from its declared Settings namespace."""
    setting = db.tables.setting
    namespace = declaration.get("settings_namespace")
    gkey = declaration.get("global_limit_key")
    kkey = declaration.get("concurrency_key_limit_key")
    if not (isinstance(namespace, str) and isinstance(gkey, str) and isinstance(kkey, str)):
        return GroupLimits(None, None, "capacity declaration on the job is malformed")
    rows = dict(
        conn.execute(
            select(setting.c.key, setting.c.value).where(
                setting.c.namespace == namespace, setting.c.key.in_([gkey, kkey])
            )
        ).all()
    )
    problems: list[str] = []
    limits: list[int | None] = []
    for key in (gkey, kkey):
        if key not in rows:
            problems.append(f"setting {namespace}/{key} is missing")
            limits.append(None)
            continue
        value = limit_value(rows[key])
        if value is None:
            problems.append(f"setting {namespace}/{key} is invalid ({rows[key]!r})")
        limits.append(value)
    return GroupLimits(limits[0], limits[1], "; ".join(problems) or None)


def claim_keyed(
    db: Database,
    conn: Connection,
    *,
    queue: str,
    node: str,
    limit: int,
    now: datetime,
    lease: timedelta,
    code_version: str | None,
) -> list[ClaimedJob]:
    """Admit and claim up to ``limit`` keyed jobs of ``queue``."""
    job = db.tables.job
    candidates = conn.execute(
        select(job.c.id, job.c.concurrency_key, job.c.capacity_group, job.c.meta)
        .where(
            job.c.state == JobState.AVAILABLE.value,
            job.c.queue == queue,
            job.c.scheduled_at <= now,
            job.c.concurrency_key.is_not(None),
        )
        .order_by(job.c.priority, job.c.scheduled_at, job.c.id)
        .limit(max(limit * 4, CANDIDATE_WINDOW))
    ).all()
    if not candidates:
        return []
    groups = sorted({c.capacity_group for c in candidates if c.capacity_group})
    keys = sorted({c.concurrency_key for c in candidates if not c.capacity_group})
    if db.is_postgresql:
        for lock in sorted([_lock_id("g", g) for g in groups] + [_lock_id("k", k) for k in keys]):
            conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": lock})
        # Time passed while waiting for the locks: runs must not appear to start before the
        # admission that allowed them (the history is how limits are audited).
        now = max(now, utcnow())

    executing = conn.execute(
        select(job.c.capacity_group, job.c.concurrency_key, func.count())
        .where(
            job.c.state == JobState.EXECUTING.value,
            job.c.concurrency_key.in_(sorted({c.concurrency_key for c in candidates}))
            | job.c.capacity_group.in_(groups),
        )
        .group_by(job.c.capacity_group, job.c.concurrency_key)
    ).all()
    per_group: Counter[str] = Counter()
    per_group_key: Counter[tuple[str, str]] = Counter()
    per_key: Counter[str] = Counter()
    for group, key, count in executing:
        per_key[key] += count
        if group:
            per_group[group] += count
            per_group_key[(group, key)] += count

    limits: dict[str, GroupLimits] = {}
    admitted: list[Any] = []
    for c in candidates:
        if len(admitted) >= limit:
            break
        key = c.concurrency_key
        group = c.capacity_group
        if group:
            if group not in limits:
                limits[group] = read_group_limits(conn, db, (c.meta or {}).get("capacity") or {})
            gl = limits[group]
            if gl.problem or gl.global_limit is None or gl.per_key_limit is None:
                continue
            if (
                per_group[group] >= gl.global_limit
                or per_group_key[(group, key)] >= gl.per_key_limit
            ):
                continue
            per_group[group] += 1
            per_group_key[(group, key)] += 1
        else:
            if per_key[key] >= 1:
                continue
        per_key[key] += 1
        admitted.append(c.id)
    if not admitted:
        return []
    return claim_jobs(
        db,
        conn,
        queue=queue,
        node=node,
        limit=len(admitted),
        now=now,
        lease=lease,
        code_version=code_version,
        keyless_only=False,
        job_ids=admitted,
    )
