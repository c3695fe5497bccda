"""Cron schedules as operators see them: loaded from the application, or as nodes publish them.

A schedule lives in the application's code. ``kickside worker --app my_app.jobs`` runs the
module's ``SCHEDULE`` (:func:`app_schedule`); ``--schedule module:ATTRIBUTE`` names one
(:func:`load_schedule`). Every pool publishes the entries it runs on each heartbeat (see
:class:`~kickside_engine.plugins.cron.SchedulePublication`), so :func:`running_schedule` shows
production's schedule without importing the application: merged across the nodes whose
heartbeat is fresh, each entry with the nodes that run it and its last run from
``kickside_recurring_execution``.
"""

from __future__ import annotations

import importlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from kickside_engine.clock import ensure_aware
from kickside_engine.control.queues import NODE_STALE_AFTER
from kickside_engine.errors import ConfigurationError, InvalidArgumentError, KicksideError
from kickside_engine.plugins.cron import Recurring, next_run, validate_schedule
from kickside_engine.redact import redact_text
from kickside_engine.store.database import Database

#: The attribute of an application module that holds its schedule.
SCHEDULE_ATTRIBUTE = "SCHEDULE"


@dataclass(frozen=True)
class CronEntryStatus:
    """An entry as the dashboard and CLI show it.

    ``nodes`` are the running nodes that publish the entry (by key); ``error`` explains an
    expression that cannot be read, a job that cannot be built, or nodes that disagree.
    """

    key: str
    expression: str
    next_run: datetime | None
    last_run: datetime | None
    last_job_id: uuid.UUID | None
    error: str | None = None
    timezone: str = "UTC"
    worker: str | None = None
    queue: str | None = None
    nodes: tuple[str, ...] = ()


def _import(module_name: str, what: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except (ImportError, ValueError, TypeError) as exc:  # "" and ".x" are not module names
        # A bad entry raises InvalidArgumentError (a ValueError) while the module imports.
        raise ConfigurationError(f"cannot import {what} module {module_name!r}: {exc}") from None


def _entries(value: Any, name: str) -> tuple[Recurring, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(
            f"{name} is not a list of Recurring entries (it is a {type(value).__name__})"
        )
    try:
        validate_schedule(value)
    except InvalidArgumentError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None
    return tuple(value)


def load_schedule(spec: str) -> tuple[Recurring, ...]:
    """The schedule named ``module`` or ``module:ATTRIBUTE`` (default ``SCHEDULE``).

    A module that cannot be imported (a bad entry fails its import) or an attribute that is not
    a list of :class:`Recurring` with unique keys is a :class:`ConfigurationError`.
    """
    module_name, _, attribute = spec.partition(":")
    module = _import(module_name, "schedule")
    name = attribute or SCHEDULE_ATTRIBUTE
    if not hasattr(module, name):
        raise ConfigurationError(f"{module_name}:{name} does not exist")
    return _entries(getattr(module, name), f"{module_name}:{name}")


def app_schedule(app: str) -> tuple[Recurring, ...]:
    """The ``SCHEDULE`` of the application module ``app`` (``module[:registry]``), if it has one.

    A module without ``SCHEDULE`` schedules nothing; one that cannot be imported, or whose
    ``SCHEDULE`` is not a valid schedule, is a :class:`ConfigurationError`.
    """
    module_name = app.partition(":")[0]
    module = _import(module_name, "worker")
    value = getattr(module, SCHEDULE_ATTRIBUTE, None)
    if value is None:
        return ()
    return _entries(value, f"{module_name}:{SCHEDULE_ATTRIBUTE}")


def cron_status(db: Database, entries: Sequence[Recurring], now: datetime) -> list[CronEntryStatus]:
    """Each of ``entries`` with its next run after ``now``, its last run, and the running nodes
    that publish it."""
    now = ensure_aware(now, "now")
    with db.read() as conn:
        last = _last_runs(db, conn, [e.key for e in entries])
        published = _publications(db, conn, now)
    runners: dict[str, list[str]] = {}
    for node, items in published:
        for item in items:
            runners.setdefault(item["key"], []).append(node)
    statuses = []
    for entry in entries:
        error = None
        upcoming = None
        try:
            upcoming = entry.next_run(now)
        except InvalidArgumentError as exc:
            error = str(exc)
        run_at, job_id = last.get(entry.key, (None, None))
        job = _job_of(entry)
        statuses.append(
            CronEntryStatus(
                key=entry.key,
                expression=entry.cron,
                next_run=upcoming,
                last_run=run_at,
                last_job_id=job_id,
                error=error or job[2],
                timezone=entry.timezone,
                worker=job[0],
                queue=job[1],
                nodes=tuple(sorted(set(runners.get(entry.key, ())))),
            )
        )
    return statuses


def running_schedule(db: Database, now: datetime) -> list[CronEntryStatus]:
    """The cron entries the running nodes publish, merged, by key.

    A node counts while its heartbeat is fresh (within ``NODE_STALE_AFTER`` of ``now``). Nodes
    that publish the same definition (expression, timezone, worker, queue) share one row; when
    running nodes disagree on a key (a deploy in progress), each definition gets its own row
    and says so in ``error``. Next runs are computed at ``now``.
    """
    now = ensure_aware(now, "now")
    with db.read() as conn:
        published = _publications(db, conn, now)
        merged: dict[tuple[Any, ...], dict[str, Any]] = {}
        for node, items in published:
            for item in items:
                variant = (
                    item["key"],
                    item["expression"],
                    item["timezone"],
                    item["worker"],
                    item["queue"],
                )
                found = merged.setdefault(variant, {"nodes": set(), "next": [], "error": None})
                found["nodes"].add(node)
                found["next"].append(item["next_run"])
                found["error"] = found["error"] or item["error"]
        last = _last_runs(db, conn, sorted({variant[0] for variant in merged}))
    definitions: dict[str, int] = {}
    for variant in merged:
        definitions[variant[0]] = definitions.get(variant[0], 0) + 1
    statuses = []
    for variant, found in sorted(merged.items(), key=lambda kv: tuple(map(str, kv[0]))):
        key, expression, timezone, worker, queue = variant
        error = found["error"]
        try:
            upcoming: datetime | None = next_run(expression, now, timezone=timezone)
        except InvalidArgumentError as exc:
            # An expression this engine cannot read (a newer node's): trust the node's answer.
            upcoming = min((n for n in found["next"] if n is not None and n > now), default=None)
            error = error or str(exc)
        if definitions[key] > 1:
            error = f"running nodes disagree on this entry: {definitions[key]} definitions"
        run_at, job_id = last.get(key, (None, None))
        statuses.append(
            CronEntryStatus(
                key=key,
                expression=expression,
                next_run=upcoming,
                last_run=run_at,
                last_job_id=job_id,
                error=error,
                timezone=timezone,
                worker=worker,
                queue=queue,
                nodes=tuple(sorted(found["nodes"])),
            )
        )
    return statuses


def _job_of(entry: Recurring) -> tuple[str | None, str | None, str | None]:
    """(worker, queue, error) of the job ``entry`` enqueues."""
    try:
        options = entry.job().options
    except Exception as exc:  # the application's code: whatever it raises, show the rest
        return None, None, redact_text(f"job() failed: {type(exc).__name__}: {exc}")
    return options.worker, options.queue, None


def _publications(
    db: Database, conn: Connection, now: datetime
) -> list[tuple[str, list[dict[str, Any]]]]:
    """(node, entries) of every node with a fresh heartbeat that published a schedule.

    What a node wrote is read defensively (another version may write more, or less): an item
    without a string key is skipped, missing fields read as None.
    """
    node = db.tables.node
    rows = conn.execute(
        select(node.c.name, node.c.schedule)
        .where(node.c.heartbeat_at >= now - NODE_STALE_AFTER, node.c.schedule.is_not(None))
        .order_by(node.c.name)
    )
    found = []
    for name, schedule in rows:
        if not isinstance(schedule, list):
            continue
        items = []
        for item in schedule:
            if not isinstance(item, dict) or not isinstance(item.get("key"), str):
                continue
            items.append(
                {
                    "key": item["key"],
                    "expression": _text(item.get("expression")) or "?",
                    "timezone": _text(item.get("timezone")) or "UTC",
                    "worker": _text(item.get("worker")),
                    "queue": _text(item.get("queue")),
                    "next_run": _time(item.get("next_run")),
                    "error": _text(item.get("error")),
                }
            )
        found.append((name, items))
    return found


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return ensure_aware(datetime.fromisoformat(value), "next_run")
    except (ValueError, KicksideError):
        return None


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


__all__ = [
    "SCHEDULE_ATTRIBUTE",
    "CronEntryStatus",
    "app_schedule",
    "cron_status",
    "load_schedule",
    "running_schedule",
]
