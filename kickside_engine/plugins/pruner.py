"""Pruner: final jobs older than the retention period are deleted, with their run history.

Final rows stay for operators (history matters) until they are ``max_age`` old. Deletion runs in
bounded batches, each its own short transaction, so a large backlog never holds a long lock;
whatever is left waits for the next tick. Run rows go with their job (``ON DELETE CASCADE``;
the engine turns SQLite's foreign keys on for every connection it opens).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from kickside_engine.clock import ensure_aware
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.store.database import Database
from kickside_engine.store.maintenance import delete_final_jobs, delete_recurring_runs
from kickside_engine.store.rate_windows import delete_ended_windows
from kickside_engine.store.workflows import delete_final_workflows

log = logging.getLogger("kickside.plugins.pruner")
DEFAULT_MAX_AGE = timedelta(days=7)
BATCH = 1_000
MAX_BATCHES = 10


def prune(
    db: Database,
    now: datetime,
    *,
    max_age: timedelta = DEFAULT_MAX_AGE,
    batch: int = BATCH,
    max_batches: int = MAX_BATCHES,
) -> int:
    """Delete final jobs finalized more than ``max_age`` before ``now``; returns how many.

    At most ``batch * max_batches`` jobs per call. Non-final jobs are never deleted, nor a job
    an operator retried between the select and the delete (the delete re-checks the state).
    A workflow is deleted only as a whole, once every job of it is final and old enough (a
    downstream job still reads its upstreams' results).
    """
    now = ensure_aware(now, "now")
    _check_positive(batch=batch, max_batches=max_batches)
    if max_age < timedelta(0):
        raise InvalidArgumentError(f"max_age must not be negative, got {max_age}")
    try:
        cutoff = now - max_age
    except OverflowError:
        return 0  # older than year 1: nothing can be that old
    total = delete_final_workflows(db, cutoff, batch)
    for _ in range(max_batches):
        selected, deleted = delete_final_jobs(db, cutoff, batch)
        total += deleted
        if selected < batch:
            break
    if total:
        log.debug("pruned jobs", extra={"plugin": "pruner", "count": total})
    return total


def prune_recurring_executions(
    db: Database, now: datetime, max_age: timedelta = DEFAULT_MAX_AGE
) -> int:
    """Delete cron bookkeeping rows whose run is more than ``max_age`` before ``now``.

    Cron only claims runs due within the last minute, so old rows no longer guard anything.
    """
    now = ensure_aware(now, "now")
    if max_age < timedelta(minutes=2):
        # Younger rows still stop a second node from firing the same run.
        raise InvalidArgumentError(f"max_age must be at least 2 minutes, got {max_age}")
    count = delete_recurring_runs(db, now - max_age)
    if count:
        log.debug("pruned recurring executions", extra={"plugin": "pruner", "count": count})
    return count


def prune_rate_windows(db: Database, now: datetime) -> int:
    """Delete the start counts of capacity groups' rate windows that ended before ``now``.

    Claims count only in the window holding their time, so an ended window guards nothing.
    """
    count = delete_ended_windows(db, ensure_aware(now, "now"))
    if count:
        log.debug("pruned rate windows", extra={"plugin": "pruner", "count": count})
    return count


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"{name} must be a positive integer, got {value!r}")
