"""Leases after the claim: renewing the ones a node still holds, reading them, ending them.

A claimed job is leased to its node under a fencing token until ``lease_expires_at``
(:data:`DEFAULT_LEASE` after the claim, unless told otherwise). The node renews the leases it
still holds while their jobs run (:func:`renew_leases`); a token that is no longer renewed was
rescued, cancelled or settled elsewhere, and its execution must stop. A node that stops ends its
leases at once (:func:`expire_leases`), so that a Lifeline rescues their jobs without waiting.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, select, update

from kickside_engine.models import JobState
from kickside_engine.store.database import Database
from kickside_engine.store.tables import state_literal

#: How long a claim or a renewal leases a job for, unless told otherwise.
DEFAULT_LEASE = timedelta(seconds=30)


def leases_held_by(job: Any, node: str, tokens: Sequence[uuid.UUID]) -> ColumnElement[bool]:
    """Jobs still executing under one of ``tokens``, leased to ``node``: the leases it holds."""
    return and_(
        job.c.state == state_literal(JobState.EXECUTING),
        job.c.lease_owner == node,
        job.c.lease_token.in_(list(tokens)),
    )


def renew_leases(
    db: Database,
    *,
    node: str,
    tokens: Sequence[uuid.UUID],
    now: datetime,
    lease: timedelta = DEFAULT_LEASE,
) -> set[uuid.UUID]:
    """Extend the leases this node still holds; returns the tokens that are still held.

    A token missing from the result lost its lease (rescued, cancelled or finished elsewhere):
    its execution must stop, since another node may now run the job.
    """
    if not tokens:
        return set()
    job = db.tables.job
    held: set[uuid.UUID] = set()
    with db.begin() as conn:
        for start in range(0, len(tokens), 500):
            chunk = list(tokens[start : start + 500])
            result = conn.execute(
                update(job)
                .where(leases_held_by(job, node, chunk))
                .values(lease_expires_at=now + lease, updated_at=now)
                .returning(job.c.lease_token)
            )
            held.update(r[0] for r in result)
    return held


def leases_still_held(db: Database, *, node: str, tokens: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of ``tokens`` this node still holds (no renewal: a read)."""
    if not tokens:
        return set()
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(select(job.c.lease_token).where(leases_held_by(job, node, tokens)))
        return {r[0] for r in rows}


def expire_leases(db: Database, *, node: str, tokens: Sequence[uuid.UUID], now: datetime) -> None:
    """End these leases of this node now, so that any Lifeline rescues their jobs at once."""
    if not tokens:
        return
    job = db.tables.job
    with db.begin() as conn:
        conn.execute(
            update(job)
            .where(leases_held_by(job, node, tokens))
            .values(lease_expires_at=now, updated_at=now)
        )
