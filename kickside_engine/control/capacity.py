"""Capacity groups for operators: limits, usage now, and the jobs waiting on admission.

Claims enforce the limits (:mod:`kickside_engine.store.keyed_claims`); this module shows them
and changes them. Groups are discovered from the jobs that declare them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware
from kickside_engine.errors import InvalidArgumentError, NotFoundError
from kickside_engine.models import INCOMPLETE_STATES, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.keyed_claims import GroupLimits, read_group_limits
from kickside_engine.store.revisions import COMPATIBILITY_NAMESPACE
from kickside_engine.store.settings import check_setting_name, set_setting
from kickside_engine.text import known_names

WAITING_SAMPLE = 20


@dataclass(frozen=True)
class WaitingJob:
    """A due job of the group that is not admitted now, and why."""

    job_id: Any
    concurrency_key: str | None
    reason: str


@dataclass(frozen=True)
class CapacityGroupInfo:
    """A capacity group as operators see it."""

    group: str
    settings_namespace: str | None
    global_limit_key: str | None
    concurrency_key_limit_key: str | None
    global_limit: int | None
    per_key_limit: int | None
    problem: str | None
    executing: int
    per_key: dict[str, int]
    waiting: int
    waiting_jobs: list[WaitingJob]

    @property
    def near_limit(self) -> bool:
        """Usage at or above 80 % of the global limit, or admission refused outright."""
        if self.problem is not None or self.global_limit is None:
            return True
        return self.global_limit == 0 or self.executing >= 0.8 * self.global_limit


def waiting_reason(
    limits: GroupLimits, executing: int, per_key: Counter[str], key: str | None
) -> str:
    """Why a due job of a group is not admitted now ("eligible" when it could be)."""
    if limits.problem or limits.global_limit is None or limits.per_key_limit is None:
        return f"capacity settings invalid: {limits.problem}"
    if executing >= limits.global_limit:
        return f"global limit reached ({executing}/{limits.global_limit})"
    used = per_key[key or ""]
    if used >= limits.per_key_limit:
        return f"limit for concurrency key {key!r} reached ({used}/{limits.per_key_limit})"
    return "eligible: admitted at the next claim"


def capacity_groups(db: Database, now: datetime) -> list[CapacityGroupInfo]:
    """Every capacity group that has unfinished jobs, with its limits read now."""
    now = ensure_aware(now, "now")
    job = db.tables.job
    active = [s.value for s in INCOMPLETE_STATES]
    infos = []
    with db.read() as conn:
        groups = (
            conn.execute(
                select(job.c.capacity_group)
                .where(job.c.capacity_group.is_not(None), job.c.state.in_(active))
                .group_by(job.c.capacity_group)
                .order_by(job.c.capacity_group)
            )
            .scalars()
            .all()
        )
        for group in groups:
            meta = conn.execute(
                select(job.c.meta)
                .where(job.c.capacity_group == group, job.c.state.in_(active))
                .limit(1)
            ).scalar_one()
            declaration = (meta or {}).get("capacity") or {}
            limits = read_group_limits(db, conn, declaration)
            per_key: Counter[str] = Counter(
                dict(
                    conn.execute(
                        select(job.c.concurrency_key, func.count())
                        .where(
                            job.c.capacity_group == group,
                            job.c.state == JobState.EXECUTING.value,
                        )
                        .group_by(job.c.concurrency_key)
                    ).all()
                )
            )
            executing = sum(per_key.values())
            due = (
                job.c.capacity_group == group,
                job.c.state == JobState.AVAILABLE.value,
                job.c.scheduled_at <= now,
            )
            waiting = conn.execute(select(func.count()).select_from(job).where(*due)).scalar_one()
            sample = conn.execute(
                select(job.c.id, job.c.concurrency_key)
                .where(*due)
                .order_by(job.c.priority, job.c.scheduled_at, job.c.id)
                .limit(WAITING_SAMPLE)
            ).all()
            infos.append(
                CapacityGroupInfo(
                    group=group,
                    settings_namespace=declaration.get("settings_namespace"),
                    global_limit_key=declaration.get("global_limit_key"),
                    concurrency_key_limit_key=declaration.get("concurrency_key_limit_key"),
                    global_limit=limits.global_limit,
                    per_key_limit=limits.per_key_limit,
                    problem=limits.problem,
                    executing=executing,
                    per_key=dict(per_key),
                    waiting=waiting,
                    waiting_jobs=[
                        WaitingJob(
                            r.id,
                            r.concurrency_key,
                            waiting_reason(limits, executing, per_key, r.concurrency_key),
                        )
                        for r in sample
                    ],
                )
            )
    return infos


def _namespaces(db: Database, conn: Connection) -> list[str]:
    job, setting = db.tables.job, db.tables.setting
    found = set(conn.execute(select(setting.c.namespace).distinct()).scalars())
    found.discard(COMPATIBILITY_NAMESPACE)  # the migrations' record, not a capacity group
    groups = conn.execute(
        select(job.c.capacity_group)
        .where(job.c.capacity_group.is_not(None))
        .group_by(job.c.capacity_group)
    ).scalars()
    for group in list(groups):
        meta = conn.execute(
            select(job.c.meta).where(job.c.capacity_group == group).limit(1)
        ).scalar_one_or_none()
        declared = ((meta or {}).get("capacity") or {}).get("settings_namespace")
        if isinstance(declared, str):
            found.add(declared)
    return sorted(found)


def capacity_namespaces(db: Database) -> list[str]:
    """The settings namespaces of capacity groups: declared by a job, or holding settings."""
    with db.read() as conn:
        return _namespaces(db, conn)


def stops_work(global_limit: int, per_key_limit: int) -> bool:
    """Whether these limits admit no job at all (a limit of 0 halts the group)."""
    return global_limit == 0 or per_key_limit == 0


def set_capacity(
    db: Database,
    namespace: str,
    *,
    global_limit: int,
    per_key_limit: int,
    actor: Actor,
    now: datetime,
    global_limit_key: str = "global_limit",
    concurrency_key_limit_key: str = "concurrency_key_limit",
    create: bool = False,
) -> dict[str, int]:
    """Write a group's two limits (whole numbers >= 0) in one audited transaction.

    The namespace must be known (:func:`capacity_namespaces`: a job declares it or settings
    exist under it), else :class:`NotFoundError` listing the known ones: a mistyped namespace
    would hold limits nothing reads. ``create=True`` writes limits before any job declares
    the group. A limit of 0 admits no job of the group (see :func:`stops_work`).
    """
    now = ensure_aware(now, "now")
    for name, value in (("global_limit", global_limit), ("per_key_limit", per_key_limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(f"{name} must be a whole number >= 0, got {value!r}")
    check_setting_name(namespace, "namespace")
    with db.begin() as conn:
        if not create:
            known = _namespaces(db, conn)
            if namespace not in known:
                raise NotFoundError(
                    f"capacity namespace {namespace[:80]!r} not found: no job declares it and "
                    f"no setting is under it (known namespaces: {known_names(known)})",
                    details={"namespace": namespace, "known": known},
                )
        set_setting(
            db, namespace, global_limit_key, global_limit, updated_by=actor.user, conn=conn, now=now
        )
        set_setting(
            db,
            namespace,
            concurrency_key_limit_key,
            per_key_limit,
            updated_by=actor.user,
            conn=conn,
            now=now,
        )
        record_audit(
            db,
            conn,
            actor,
            "capacity_set",
            "settings",
            namespace,
            {global_limit_key: global_limit, concurrency_key_limit_key: per_key_limit},
            now,
        )
    return {global_limit_key: global_limit, concurrency_key_limit_key: per_key_limit}
