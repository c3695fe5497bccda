"""Capacity groups for operators: limits, usage now, and the jobs waiting on admission.

Claims enforce the limits (:mod:`kickside_engine.store.keyed_claims`); this module shows them
and changes them. Groups are discovered from the jobs that declare them. Rate limits show the
starts counted in the current window against the limit
(:mod:`~kickside_engine.store.rate_windows`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, func, select

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware
from kickside_engine.errors import InvalidArgumentError, NotFoundError
from kickside_engine.models import INCOMPLETE_STATES, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.group_limits import GroupLimits, read_group_limits
from kickside_engine.store.rate_windows import GROUP_KEY, Rate, parse_rate, window_counts
from kickside_engine.store.revisions import COMPATIBILITY_NAMESPACE
from kickside_engine.store.settings import check_setting_name, set_setting
from kickside_engine.text import known_names

__all__ = [
    "NO_RATE",
    "CapacityGroupInfo",
    "Rate",
    "RateUsage",
    "WaitingJob",
    "capacity_groups",
    "capacity_namespaces",
    "parse_rate",
    "rate_reached",
    "rate_usage",
    "set_capacity",
    "stops_work",
    "waiting_reason",
]

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
    rate_limit_key: str | None = None
    rate_limit_per_key_key: str | None = None
    #: ``"600/min"``; None when the group has no rate limit.
    rate_limit: str | None = None
    rate_limit_per_key: str | None = None
    #: Starts of the group in its current rate window, and when that window ends.
    rate_used: int = 0
    rate_window_ends_at: datetime | None = None
    #: Starts per concurrency key in the current per-key window (keys with any), and its end.
    rate_used_per_key: dict[str, int] = field(default_factory=dict)
    rate_key_window_ends_at: datetime | None = None

    @property
    def near_limit(self) -> bool:
        """Usage at or above 80 % of the global limit or rate, or admission refused outright."""
        if self.problem is not None or self.global_limit is None:
            return True
        rate = parse_rate(self.rate_limit) if self.rate_limit else None
        return (
            self.global_limit == 0
            or self.executing >= 0.8 * self.global_limit
            or (rate is not None and self.rate_used >= 0.8 * rate.limit)
        )


@dataclass(frozen=True)
class RateUsage:
    """Starts in the current rate windows of one group: the group's and per key."""

    group: int = 0
    per_key: dict[str, int] = field(default_factory=dict)
    group_window: tuple[datetime, datetime] | None = None
    key_window: tuple[datetime, datetime] | None = None


def rate_usage(
    db: Database, conn: Connection, group: str, limits: GroupLimits, now: datetime
) -> RateUsage:
    """Starts counted now in the windows of the group's rate limits (none without limits)."""
    group_window = limits.rate.window_at(now) if limits.rate else None
    key_window = limits.per_key_rate.window_at(now) if limits.per_key_rate else None
    used = window_counts(db, conn, group, [GROUP_KEY], group_window) if group_window else {}
    per_key = window_counts(db, conn, group, None, key_window) if key_window else {}
    per_key.pop(GROUP_KEY, None)
    return RateUsage(used.get(GROUP_KEY, 0), per_key, group_window, key_window)


def rate_reached(what: str, used: int, rate: Rate, window_end: datetime) -> str:
    """``rate for key acct-1 reached (60/60 this minute), next admission at 13:05:00 UTC``."""
    return (
        f"rate for {what} reached ({used}/{rate.limit} this {rate.window_word}), "
        f"next admission at {window_end:%H:%M:%S} UTC"
    )


def waiting_reason(
    limits: GroupLimits,
    executing: int,
    per_key: Counter[str],
    key: str | None,
    rates: RateUsage | None = None,
) -> str:
    """Why a due job of a group is not admitted now ("eligible" when it could be)."""
    rates = rates or RateUsage()
    if limits.problem or limits.global_limit is None or limits.per_key_limit is None:
        return f"capacity settings invalid: {limits.problem}"
    if executing >= limits.global_limit:
        return f"global limit reached ({executing}/{limits.global_limit})"
    if limits.rate and rates.group_window and rates.group >= limits.rate.limit:
        return rate_reached("the group", rates.group, limits.rate, rates.group_window[1])
    used = per_key[key or ""]
    if used >= limits.per_key_limit:
        return f"limit for concurrency key {key!r} reached ({used}/{limits.per_key_limit})"
    started = rates.per_key.get(key or "", 0)
    if limits.per_key_rate and rates.key_window and started >= limits.per_key_rate.limit:
        return rate_reached(f"key {key}", started, limits.per_key_rate, rates.key_window[1])
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
            rates = rate_usage(db, conn, group, limits, now)
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
                            waiting_reason(limits, executing, per_key, r.concurrency_key, rates),
                        )
                        for r in sample
                    ],
                    rate_limit_key=declaration.get("rate_limit_key", "rate_limit"),
                    rate_limit_per_key_key=declaration.get(
                        "rate_limit_per_key_key", "rate_limit_per_key"
                    ),
                    rate_limit=str(limits.rate) if limits.rate else None,
                    rate_limit_per_key=str(limits.per_key_rate) if limits.per_key_rate else None,
                    rate_used=rates.group,
                    rate_window_ends_at=rates.group_window[1] if rates.group_window else None,
                    rate_used_per_key=rates.per_key,
                    rate_key_window_ends_at=rates.key_window[1] if rates.key_window else None,
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


#: The value that removes a rate limit (the group then has none).
NO_RATE = "none"


def stops_work(
    global_limit: int | None,
    per_key_limit: int | None,
    rate_limit: str | None = None,
    rate_limit_per_key: str | None = None,
) -> bool:
    """Whether these limits admit no job at all (a limit or rate of 0 halts the group)."""
    rates = (r for r in (rate_limit, rate_limit_per_key) if r and r.strip() != NO_RATE)
    return global_limit == 0 or per_key_limit == 0 or any(parse_rate(r).limit == 0 for r in rates)


def set_capacity(
    db: Database,
    namespace: str,
    *,
    actor: Actor,
    now: datetime,
    global_limit: int | None = None,
    per_key_limit: int | None = None,
    rate_limit: str | None = None,
    rate_limit_per_key: str | None = None,
    global_limit_key: str = "global_limit",
    concurrency_key_limit_key: str = "concurrency_key_limit",
    rate_limit_key: str = "rate_limit",
    rate_limit_per_key_key: str = "rate_limit_per_key",
    create: bool = False,
) -> dict[str, int | str | None]:
    """Write the limits given (at least one) in one audited transaction; returns them by key.

    Concurrency limits are whole numbers >= 0. Rate limits are ``N/unit`` with unit ``s``,
    ``min`` or ``h`` (``600/min``: at most 600 starts per minute), or ``"none"`` to remove the
    rate limit (the setting is deleted; None in the result). The namespace must be known
    (:func:`capacity_namespaces`: a job declares it or settings exist under it), else
    :class:`NotFoundError` listing the known ones: a mistyped namespace would hold limits
    nothing reads. ``create=True`` writes limits before any job declares the group. A limit
    of 0 admits no job of the group (see :func:`stops_work`).
    """
    now = ensure_aware(now, "now")
    written: dict[str, int | str | None] = {}
    for name, key, value in (
        ("global_limit", global_limit_key, global_limit),
        ("per_key_limit", concurrency_key_limit_key, per_key_limit),
    ):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidArgumentError(f"{name} must be a whole number >= 0, got {value!r}")
        written[check_setting_name(key, "key")] = value
    for key, text in ((rate_limit_key, rate_limit), (rate_limit_per_key_key, rate_limit_per_key)):
        if text is None:
            continue
        rate = None if isinstance(text, str) and text.strip() == NO_RATE else parse_rate(text)
        written[check_setting_name(key, "key")] = None if rate is None else str(rate)
    if not written:
        raise InvalidArgumentError(
            "give at least one limit: global_limit, per_key_limit, rate_limit or rate_limit_per_key"
        )
    check_setting_name(namespace, "namespace")
    setting = db.tables.setting
    with db.begin() as conn:
        if not create:
            known = _namespaces(db, conn)
            if namespace not in known:
                raise NotFoundError(
                    f"capacity namespace {namespace[:80]!r} not found: no job declares it and "
                    f"no setting is under it (known namespaces: {known_names(known)})",
                    details={"namespace": namespace, "known": known},
                )
        for key, new in written.items():
            if new is None:
                conn.execute(
                    delete(setting).where(setting.c.namespace == namespace, setting.c.key == key)
                )
            else:
                set_setting(db, namespace, key, new, updated_by=actor.user, conn=conn, now=now)
        record_audit(db, conn, actor, "capacity_set", "settings", namespace, written, now)
    return written
