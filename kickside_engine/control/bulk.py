"""Bulk actions by filter: retry, cancel or discard the jobs a :class:`JobFilter` selected.

Two steps, and the second can only act on what the first showed:

- :func:`bulk_preview` selects the jobs (nothing written) and returns a :class:`BulkPreview`:
  the count, a sample, and the snapshot of the selected ids (16 bytes per job).
- :func:`bulk_apply` takes that preview and acts on those ids only. A job that arrived or came to
  match the filter after the preview is never touched; a previewed job that no longer qualifies
  (it finished, was cancelled or deleted meanwhile) is counted as *moved on*, never an error.

Safety rules (issue 19): completed jobs are never retried unless ``include_completed`` says so
(retrying a completed job runs it a second time), and an empty filter is refused unless
``all_jobs`` says so.

Applying works in bounded batches, each its own transaction with one audit row listing the ids
it changed, so a bulk over millions of rows never holds long locks. Batches walk the snapshot
in ascending id order, locking rows in that order (no deadlock between two bulks). Each job goes
through exactly the transition of the single-job action in
:mod:`kickside_engine.control.actions`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, and_, func, select

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.control.actions import (
    ACTION_TARGETS,
    JobAction,
    apply_job_action,
    eligible_states,
    retry_refusal,
)
from kickside_engine.control.queries import JobFilter, filter_clause
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.models import Job, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import lock_jobs
from kickside_engine.store.notify import local_signal
from kickside_engine.store.rows import job_from_row

DEFAULT_BATCH = 500
MAX_BATCH = 5_000
MAX_SAMPLE = 100
#: Operator tools (CLI, dashboard) ask for the count to be typed to confirm a bulk action over
#: more jobs than this, and over every job (no filter) whatever the count.
CONFIRM_BY_COUNT_ABOVE = 100
_ID_BYTES = 16


@dataclass(frozen=True)
class BulkPreview:
    """What a bulk action would change: the selected jobs' ids, how many, and the newest.

    Pass it to :func:`bulk_apply`, which acts on exactly these ids. ``completed_excluded``
    counts the completed jobs the filter matched that a retry leaves alone because
    ``include_completed`` was not given (always 0 for cancel and discard, which never touch
    final jobs).
    """

    action: str
    count: int
    sample: list[Job]
    flt: JobFilter
    include_completed: bool
    all_jobs: bool
    taken_at: datetime
    completed_excluded: int = 0
    #: The snapshot: the selected ids' 16-byte forms, concatenated in ascending order.
    snapshot: bytes = field(default=b"", repr=False)

    @property
    def needs_typed_count(self) -> bool:
        """Whether an operator must type the count to confirm (see CONFIRM_BY_COUNT_ABOVE)."""
        return self.all_jobs or self.count > CONFIRM_BY_COUNT_ABOVE

    def job_ids(self) -> Iterator[uuid.UUID]:
        """The previewed job ids, in ascending order."""
        data = self.snapshot
        for start in range(0, len(data), _ID_BYTES):
            yield uuid.UUID(bytes=data[start : start + _ID_BYTES])


@dataclass(frozen=True)
class BulkResult:
    """What a bulk action did to the ``matched`` jobs it previewed.

    ``changed`` went through the action; ``moved_on`` no longer qualified when their turn came
    (finished, cancelled, deleted or otherwise changed since the preview) and were left alone.
    """

    action: str
    matched: int
    changed: int
    moved_on: int

    def summary(self) -> str:
        """One line for operators: ``bulk retry: 350 changed, 7 had moved on``."""
        text = f"bulk {self.action}: {self.changed} changed"
        return text + (f", {self.moved_on} had moved on" if self.moved_on else "")


def _check_action(action: str) -> JobAction:
    if action not in ACTION_TARGETS:
        allowed = ", ".join(sorted(ACTION_TARGETS))
        raise InvalidArgumentError(f"unknown bulk action {action!r}: use one of {allowed}")
    return action  # type: ignore[return-value]


def _check_int(value: int, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgumentError(f"{name} must be {low}..{high}, got {value!r}")
    return value


def _qualifying(action: str, flt: JobFilter, include_completed: bool) -> frozenset[JobState]:
    states = eligible_states(action)
    if not include_completed:
        states = states - {JobState.COMPLETED}
    return states & frozenset(flt.states) if flt.states else states


def _selection(db: Database, flt: JobFilter, states: frozenset[JobState]) -> ColumnElement[bool]:
    return and_(filter_clause(db, flt), db.tables.job.c.state.in_(sorted(s.value for s in states)))


def check_bulk_request(
    action: str, flt: JobFilter, *, all_jobs: bool, include_completed: bool
) -> JobAction:
    """Refuse (:class:`InvalidArgumentError`) a bulk request that is unsafe as given.

    An empty filter needs ``all_jobs``; a retry whose filter names the completed state needs
    ``include_completed`` (retrying a completed job runs it again).
    """
    checked = _check_action(action)
    if not flt.as_dict() and not all_jobs:
        raise InvalidArgumentError(
            f"bulk {action} needs a filter, or all_jobs=True to act on every job"
        )
    if checked == "retry" and JobState.COMPLETED in flt.states and not include_completed:
        raise InvalidArgumentError(
            "bulk retry of completed jobs runs them a second time: pass include_completed=True "
            "to mean it"
        )
    return checked


def bulk_preview(
    db: Database,
    action: str,
    flt: JobFilter,
    *,
    all_jobs: bool = False,
    include_completed: bool = False,
    sample: int = 10,
    now: datetime | None = None,
) -> BulkPreview:
    """Select the jobs ``action`` would change under ``flt``; nothing is written.

    Counts only jobs the action applies to (retry skips executing and available jobs, cancel
    and discard final ones, retry completed ones unless ``include_completed``); the sample is
    the newest of them. The preview holds the selected ids: :func:`bulk_apply` acts on them and
    on nothing else. Refused as :func:`check_bulk_request` says.
    """
    checked = check_bulk_request(
        action, flt, all_jobs=all_jobs, include_completed=include_completed
    )
    _check_int(sample, "sample", 0, MAX_SAMPLE)
    taken_at = ensure_aware(now, "now") if now is not None else utcnow()
    job = db.tables.job
    states = _qualifying(checked, flt, include_completed)
    selection = _selection(db, flt, states)
    excluded = 0
    with db.read() as conn:
        ids = sorted(i.bytes for i in conn.execute(select(job.c.id).where(selection)).scalars())
        rows: Sequence[Row[Any]] = []
        if sample and ids:
            rows = conn.execute(
                select(job)
                .where(selection)
                .order_by(job.c.inserted_at.desc(), job.c.id.desc())
                .limit(sample)
            ).all()
        if checked == "retry" and not include_completed:
            left_out = _selection(db, flt, frozenset({JobState.COMPLETED}))
            excluded = conn.execute(
                select(func.count()).select_from(job).where(left_out)
            ).scalar_one()
    selected = set(ids)
    return BulkPreview(
        action=checked,
        count=len(ids),
        # The sample never shows a job the snapshot lacks (one may have arrived in between).
        sample=[j for j in map(job_from_row, rows) if j.id.bytes in selected][:sample],
        flt=flt,
        include_completed=include_completed,
        all_jobs=all_jobs,
        taken_at=taken_at,
        completed_excluded=int(excluded),
        snapshot=b"".join(ids),
    )


def _audit_target(flt: JobFilter) -> str:
    text = json.dumps(flt.as_dict(), sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 512 else text[:509] + "..."


def bulk_apply(
    db: Database,
    preview: BulkPreview,
    actor: Actor,
    now: datetime,
    *,
    batch: int = DEFAULT_BATCH,
    on_progress: Callable[[int, int], None] | None = None,
) -> BulkResult:
    """Apply the previewed action to the previewed jobs, ``batch`` jobs per transaction.

    Only the ids in ``preview`` are considered; each is re-read under its row lock and changed
    only if it still qualifies, else counted as moved on. After each batch commits,
    ``on_progress(done, total)`` reports the jobs handled so far out of the previewed count.
    Batches already committed stay applied if a later one fails.
    """
    if not isinstance(preview, BulkPreview):
        raise InvalidArgumentError(
            f"bulk_apply takes the BulkPreview that bulk_preview returned, got {preview!r}"
        )
    action = check_bulk_request(
        preview.action,
        preview.flt,
        all_jobs=preview.all_jobs,
        include_completed=preview.include_completed,
    )
    _check_int(batch, "batch", 1, MAX_BATCH)
    now = ensure_aware(now, "now")
    qualifying = _qualifying(action, preview.flt, preview.include_completed)
    ids = list(preview.job_ids())
    changed = moved_on = 0
    for number, start in enumerate(range(0, len(ids), batch), 1):
        chunk = ids[start : start + batch]
        woken: set[str] = set()
        with db.begin() as conn:
            # Lock in id order (no deadlock between two bulks), then re-check each job: it may
            # have moved on since the preview.
            rows = lock_jobs(db, conn, chunk)
            done: list[str] = []
            for current in map(job_from_row, rows):
                if current.state not in qualifying:
                    continue
                if action == "retry" and retry_refusal(current) is not None:
                    continue
                after = apply_job_action(db, conn, current, action, actor, now)
                if after is not None:
                    done.append(str(after.id))
                    if after.state is JobState.AVAILABLE:
                        woken.add(after.queue)
            details: dict[str, Any] = {
                "filter": preview.flt.as_dict(),
                "all_jobs": preview.all_jobs,
                "include_completed": preview.include_completed,
                "previewed": preview.count,
                "batch": number,
                "ids": done,
                "moved_on": len(chunk) - len(done),
            }
            target = _audit_target(preview.flt)
            record_audit(db, conn, actor, f"bulk_{action}", "jobs", target, details, now)
        signal = local_signal(db)
        for queue in sorted(woken):
            signal.wake(queue)
        changed += len(done)
        moved_on += len(chunk) - len(done)
        if on_progress is not None:
            on_progress(changed + moved_on, preview.count)
    return BulkResult(action, preview.count, changed, moved_on)
