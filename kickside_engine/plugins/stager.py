"""Stager: scheduled and retryable jobs whose time has come become available; and workflow
jobs whose upstreams a pool of older code finished are released (the sweep of
:mod:`kickside_engine.store.workflows`)."""

from __future__ import annotations

import logging
from datetime import datetime

from kickside_engine.store.database import Database
from kickside_engine.store.maintenance import stage_due
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.store.workflows import sweep_unresolved

log = logging.getLogger("kickside.plugins.stager")
BATCH = 5_000


def stage(db: Database, now: datetime, *, batch: int = BATCH, sweep: bool = True) -> int:
    """Make due scheduled/retryable jobs available (at most ``batch``); returns how many.

    With ``sweep``, also release workflow jobs whose upstreams finished without resolving
    their dependencies (:func:`~kickside_engine.store.workflows.sweep_unresolved`)."""
    with db.begin() as conn:
        staged = stage_due(db, conn, now, batch)
        if sweep:
            sweep_unresolved(db, conn, now, batch)
        queues = sorted(set(staged))
        for queue in queues:
            notify_in_transaction(db, conn, queue)
    if staged:
        log.debug("staged jobs", extra={"plugin": "stager", "count": len(staged)})
        signal = local_signal(db)
        for queue in queues:
            signal.wake(queue)
    return len(staged)
