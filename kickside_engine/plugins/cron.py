"""Cron: recurring jobs, each run enqueued exactly once across every node.

A schedule is a list of :class:`Recurring` entries (a unique key, a cron expression in UTC and
a function that builds the job)::

    SCHEDULE = [
        Recurring("cleanup", "0 * * * *", lambda: JobBuilder("cleanup")),
        Recurring("weekly_digest", "0 8 * * MON", lambda: JobBuilder("digest").priority(5)),
    ]

Every node ticks every second. A tick takes each entry's latest due time (inclusive of ``now``),
skips it when it is more than a minute old (a node booting at 09:40 does not replay the 08:00
run), and claims the run by inserting ``(key, run_at)`` into ``kickside_recurring_execution``;
the unique constraint lets exactly one node win, and the winner enqueues the job in the same
transaction.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cronsim import CronSim, CronSimError
from sqlalchemy import Connection, func, select, update

from kickside_engine.clock import ensure_aware
from kickside_engine.enqueue import JobBuilder, enqueue
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.models import Inserted
from kickside_engine.notify import local_signal
from kickside_engine.store.database import Database

log = logging.getLogger("kickside.plugins.cron")

#: A due time older than this when a node first sees it is skipped, not replayed.
MAX_LATENESS = timedelta(seconds=60)


@dataclass(frozen=True)
class Recurring:
    """One schedule entry: ``job()`` is enqueued at every occurrence of ``cron`` (UTC)."""

    key: str
    cron: str
    job: Callable[[], JobBuilder]


@dataclass(frozen=True)
class CronFire:
    """A run this node claimed and enqueued (``duplicate``: a unique job already existed)."""

    key: str
    run_at: datetime
    job_id: uuid.UUID
    duplicate: bool = False


@dataclass(frozen=True)
class CronEntryStatus:
    """An entry as the dashboard and CLI show it; ``error`` explains an invalid expression."""

    key: str
    expression: str
    next_run: datetime | None
    last_run: datetime | None
    last_job_id: uuid.UUID | None
    error: str | None = None


def _parse(cron: str, dt: datetime, *, reverse: bool) -> CronSim:
    if not isinstance(cron, str) or not cron.strip():
        raise InvalidArgumentError(f"cron expression must be a non-empty string, got {cron!r}")
    try:
        return CronSim(cron, dt, reverse=reverse)
    except CronSimError as exc:
        raise InvalidArgumentError(f"invalid cron expression {cron!r}: {exc}") from None


def _next(it: CronSim, cron: str) -> datetime:
    try:
        found: datetime = next(it)
    except StopIteration:
        raise InvalidArgumentError(f"cron expression {cron!r} never occurs") from None
    return found.astimezone(UTC)


def previous_run(cron: str, now: datetime) -> datetime:
    """The latest occurrence of ``cron`` at or before ``now`` (UTC); ``now`` itself counts."""
    now = ensure_aware(now, "now")
    # CronSim's reverse iteration is exclusive at an exact occurrence; starting one second
    # after the whole second of ``now`` makes it inclusive of that second (and no later).
    start = now.replace(microsecond=0) + timedelta(seconds=1)
    return _next(_parse(cron, start, reverse=True), cron)


def next_run(cron: str, now: datetime) -> datetime:
    """The first occurrence of ``cron`` strictly after ``now`` (UTC)."""
    now = ensure_aware(now, "now")
    return _next(_parse(cron, now, reverse=False), cron)


def validate_schedule(entries: Iterable[Recurring]) -> None:
    """Check every entry parses and keys are unique; the error names the bad entry."""
    seen: set[str] = set()
    probe = datetime(2000, 1, 1, tzinfo=UTC)
    for index, entry in enumerate(entries):
        if not isinstance(entry, Recurring):
            raise InvalidArgumentError(f"schedule entry {index} is not a Recurring: {entry!r}")
        key = entry.key
        if not isinstance(key, str) or not key.strip() or len(key) > 255:
            raise InvalidArgumentError(
                f"schedule entry {index}: key must be a non-empty string of at most 255 "
                f"characters, got {key!r}"
            )
        if key in seen:
            raise InvalidArgumentError(f"schedule entry {key!r}: duplicate key")
        seen.add(key)
        if not callable(entry.job):
            raise InvalidArgumentError(f"schedule entry {key!r}: job must be callable")
        try:
            next_run(entry.cron, probe)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"schedule entry {key!r}: {exc}") from None


def cron_tick(db: Database, entries: Sequence[Recurring], now: datetime) -> list[CronFire]:
    """Enqueue every entry whose latest due time is at most a minute before ``now``.

    Safe to run on every node at once: a run is enqueued by whichever node records it first.
    An invalid expression, or an entry whose job cannot be built, is logged and skipped.
    """
    now = ensure_aware(now, "now")
    fired: list[CronFire] = []
    for entry in entries:
        try:
            run_at = previous_run(entry.cron, now)
        except InvalidArgumentError as exc:
            log.error(
                "cron entry %r skipped: %s",
                entry.key,
                exc,
                extra={"plugin": "cron", "cron_key": entry.key},
            )
            continue
        if now - run_at > MAX_LATENESS:
            continue
        try:
            builder = entry.job().tag("cron").meta({"cron": entry.key})
            fire = _claim_and_enqueue(db, entry.key, run_at, builder, now)
        except InvalidArgumentError as exc:
            log.error(
                "cron entry %r could not enqueue its job: %s",
                entry.key,
                exc,
                extra={"plugin": "cron", "cron_key": entry.key},
            )
            continue
        if fire is not None:
            fired.append(fire)
    if fired:
        log.debug("cron fired", extra={"plugin": "cron", "count": len(fired)})
    return fired


def _claim_and_enqueue(
    db: Database, key: str, run_at: datetime, builder: JobBuilder, now: datetime
) -> CronFire | None:
    table = db.tables.recurring_execution
    with db.begin() as conn:
        execution_id = conn.execute(
            _insert_ignoring_conflict(db).returning(table.c.id), {"key": key, "run_at": run_at}
        ).scalar_one_or_none()
        if execution_id is None:
            return None  # another node (or an earlier tick) owns this run
        inserted: Inserted = enqueue(db, builder, conn=conn, now=now)
        conn.execute(update(table).where(table.c.id == execution_id).values(job_id=inserted.id))
    if not inserted.duplicate:
        # enqueue woke local pools before our commit; wake them again now the job is visible.
        local_signal(db).wake(builder.options.queue)
    return CronFire(key=key, run_at=run_at, job_id=inserted.id, duplicate=inserted.duplicate)


def _insert_ignoring_conflict(db: Database) -> Any:
    table = db.tables.recurring_execution
    return db.upsert_insert(table).on_conflict_do_nothing(index_elements=["key", "run_at"])


def cron_status(db: Database, entries: Sequence[Recurring], now: datetime) -> list[CronEntryStatus]:
    """Each entry's next run after ``now``, its last recorded run and the job that run enqueued."""
    now = ensure_aware(now, "now")
    with db.read() as conn:
        last = _last_runs(db, conn, [e.key for e in entries])
    statuses = []
    for entry in entries:
        error = None
        upcoming = None
        try:
            upcoming = next_run(entry.cron, now)
        except InvalidArgumentError as exc:
            error = str(exc)
        run_at, job_id = last.get(entry.key, (None, None))
        statuses.append(
            CronEntryStatus(
                key=entry.key,
                expression=entry.cron,
                next_run=upcoming,
                last_run=run_at,
                last_job_id=job_id,
                error=error,
            )
        )
    return statuses


def _last_runs(
    db: Database, conn: Connection, keys: Sequence[str]
) -> dict[str, tuple[datetime, uuid.UUID | None]]:
    if not keys:
        return {}
    table = db.tables.recurring_execution
    latest = (
        select(table.c.key, func.max(table.c.run_at).label("run_at"))
        .where(table.c.key.in_(sorted(set(keys))))
        .group_by(table.c.key)
        .subquery()
    )
    rows = conn.execute(
        select(table.c.key, table.c.run_at, table.c.job_id).join(
            latest, (latest.c.key == table.c.key) & (latest.c.run_at == table.c.run_at)
        )
    ).all()
    return {r.key: (r.run_at, r.job_id) for r in rows}
