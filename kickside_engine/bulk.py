"""Bulk actions by filter: retry, cancel or discard every job a :class:`JobFilter` selects.

Preview first (:func:`bulk_preview`: the count and a sample, nothing written), then apply
(:func:`bulk_apply`). Applying works in bounded batches, each its own transaction with one audit
row listing the ids it changed, so a bulk over millions of rows never holds long locks. Batches
walk the ids in ascending order (keyset) below the highest id selected at the start, so the walk
ends even while rows keep changing. A job that no longer qualifies (it finished, or was
cancelled meanwhile) is never an error: changed before its batch read it, it is not selected;
changed while its batch waited for the row lock, it is counted as skipped.

Each job goes through exactly the transition of the single-job action in
:mod:`kickside_engine.control_actions`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, func, select

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware
from kickside_engine.control_actions import (
    ACTION_TARGETS,
    JobAction,
    apply_job_action,
    eligible_states,
)
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.models import Job, JobState
from kickside_engine.notify import local_signal
from kickside_engine.queries import JobFilter, filter_clause
from kickside_engine.store.database import Database
from kickside_engine.store.rows import job_from_row

DEFAULT_BATCH = 500
MAX_BATCH = 5_000
MAX_SAMPLE = 100


@dataclass(frozen=True)
class BulkPreview:
    """What a bulk action would change: how many jobs, and the newest of them."""

    action: str
    count: int
    sample: list[Job]


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did: ``matched`` jobs were selected, ``changed + skipped`` of them."""

    action: str
    matched: int
    changed: int
    skipped: int


def _check_action(action: str) -> JobAction:
    if action not in ACTION_TARGETS:
        allowed = ", ".join(sorted(ACTION_TARGETS))
        raise InvalidArgumentError(f"unknown bulk action {action!r}: use one of {allowed}")
    return action  # type: ignore[return-value]


def _check_int(value: int, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(f"{field} must be {low}..{high}, got {value!r}")
    return value


def _qualifying(action: str, flt: JobFilter) -> frozenset[JobState]:
    states = eligible_states(action)
    return states & frozenset(flt.states) if flt.states else states


def _selection(db: Database, action: str, flt: JobFilter) -> ColumnElement[bool]:
    states = sorted(s.value for s in _qualifying(action, flt))
    return and_(filter_clause(db, flt), db.tables.job.c.state.in_(states))


def bulk_preview(db: Database, action: str, flt: JobFilter, *, sample: int = 10) -> BulkPreview:
    """How many jobs ``action`` would change under ``flt``, with up to ``sample`` of them.

    Counts only jobs the action applies to (retry skips executing jobs, cancel final ones);
    the sample is the newest of them. Writes nothing.
    """
    _check_action(action)
    _check_int(sample, "sample", 0, MAX_SAMPLE)
    job = db.tables.job
    selection = _selection(db, action, flt)
    with db.read() as conn:
        count = conn.execute(select(func.count()).select_from(job).where(selection)).scalar_one()
        rows: Sequence[Row[Any]] = []
        if sample:
            rows = conn.execute(
                select(job)
                .where(selection)
                .order_by(job.c.inserted_at.desc(), job.c.id.desc())
                .limit(sample)
            ).all()
    return BulkPreview(action, int(count), [job_from_row(r) for r in rows])


def _audit_target(flt: JobFilter) -> str:
    text = json.dumps(flt.as_dict(), sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 512 else text[:509] + "..."


def bulk_apply(
    db: Database,
    action: str,
    flt: JobFilter,
    actor: Actor,
    now: datetime,
    *,
    batch: int = DEFAULT_BATCH,
    on_progress: Callable[[int, int], None] | None = None,
) -> BulkResult:
    """Apply ``action`` to every job ``flt`` selects, ``batch`` jobs per transaction.

    After each batch commits, ``on_progress(done, total)`` reports the jobs handled so far
    and the number selected at the start (raised if more turned up). Batches already
    committed stay applied if a later one fails.
    """
    action = _check_action(action)
    _check_int(batch, "batch", 1, MAX_BATCH)
    now = ensure_aware(now, "now")
    job = db.tables.job
    selection = _selection(db, action, flt)
    qualifying = _qualifying(action, flt)
    with db.read() as conn:
        total = conn.execute(select(func.count()).select_from(job).where(selection)).scalar_one()
        # PostgreSQL has no max(uuid): the newest id by index order instead.
        upper = conn.execute(
            select(job.c.id).where(selection).order_by(job.c.id.desc()).limit(1)
        ).scalar_one_or_none()
    matched = changed = skipped = 0
    last: uuid.UUID | None = None
    number = 0
    while upper is not None:
        number += 1
        woken: set[str] = set()
        with db.begin() as conn:
            stmt = (
                select(job.c.id)
                .where(selection, job.c.id <= upper)
                .order_by(job.c.id)
                .limit(batch)
            )
            if last is not None:
                stmt = stmt.where(job.c.id > last)
            ids = list(conn.execute(stmt).scalars())
            if not ids:
                break
            last = ids[-1]
            # Lock in id order (no deadlock between two bulks), then re-check each job: it may
            # have moved on since the ids were read.
            rows = conn.execute(
                select(job).where(job.c.id.in_(ids)).order_by(job.c.id).with_for_update()
            ).all()
            done: list[str] = []
            for current in (job_from_row(r) for r in rows):
                if current.state not in qualifying:
                    continue
                after = apply_job_action(conn, db, current, action, actor, now)
                if after is not None:
                    done.append(str(after.id))
                    if after.state is JobState.AVAILABLE:
                        woken.add(after.queue)
            details: dict[str, Any] = {
                "filter": flt.as_dict(),
                "batch": number,
                "ids": done,
                "skipped": len(ids) - len(done),
            }
            target = _audit_target(flt)
            record_audit(conn, db, actor, f"bulk_{action}", "jobs", target, details, now)
        signal = local_signal(db)
        for queue in sorted(woken):
            signal.wake(queue)
        matched += len(ids)
        changed += len(done)
        skipped += len(ids) - len(done)
        if on_progress is not None:
            on_progress(matched, max(int(total), matched))
        if len(ids) < batch:
            break
    return BulkResult(action, matched, changed, skipped)
