"""Consistency checks: queries that find jobs in a state the engine never produces.

Every change the engine makes keeps a job's columns and its run history in step: a job is
``executing`` only under a lease with exactly one open run, a final job carries its final
timestamps, a run is open only while its lease is held. Most of this is also guarded by CHECK
constraints; the rest spans two tables or two rows, so it is checked here. ``kickside doctor``
runs these checks; the property suites run them after every step, and the fault suites (crash
chaos, database outage, SQLite contention, paused lease) once their pools have stopped.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, exists, func, or_, select

from kickside_engine.models import FINAL_STATES, JobKind, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.tables import Tables, state_literal

#: Job ids reported per failed check.
SAMPLE = 20


@dataclass(frozen=True)
class Inconsistency:
    """One check that found jobs in an impossible state, with some of their ids."""

    check: str
    description: str
    job_ids: tuple[uuid.UUID, ...]


def _executing_without_lease(t: Tables) -> Select[Any]:
    job = t.job
    return select(job.c.id).where(
        job.c.state == state_literal(JobState.EXECUTING),
        or_(
            job.c.lease_owner.is_(None),
            job.c.lease_token.is_(None),
            job.c.lease_expires_at.is_(None),
            job.c.attempted_at.is_(None),
        ),
    )


def _lease_outside_executing(t: Tables) -> Select[Any]:
    job = t.job
    return select(job.c.id).where(
        job.c.state != JobState.EXECUTING.value,
        or_(job.c.lease_token.is_not(None), job.c.lease_expires_at.is_not(None)),
    )


def _open_run_of_lease(t: Tables) -> ColumnElement[bool]:
    job, run = t.job, t.job_run
    return exists().where(
        run.c.job_id == job.c.id,
        run.c.lease_token == job.c.lease_token,
        run.c.finished_at.is_(None),
    )


def _executing_without_open_run(t: Tables) -> Select[Any]:
    job = t.job
    return select(job.c.id).where(
        job.c.state == state_literal(JobState.EXECUTING), ~_open_run_of_lease(t)
    )


def _open_run_without_lease(t: Tables) -> Select[Any]:
    job, run = t.job, t.job_run
    holder = exists().where(
        job.c.id == run.c.job_id,
        job.c.state == JobState.EXECUTING.value,
        job.c.lease_token == run.c.lease_token,
    )
    return select(run.c.job_id).where(run.c.finished_at.is_(None), ~holder).distinct()


def _several_open_runs(t: Tables) -> Select[Any]:
    run = t.job_run
    return (
        select(run.c.job_id)
        .where(run.c.finished_at.is_(None))
        .group_by(run.c.job_id)
        .having(func.count() > 1)
    )


def _final_without_timestamps(t: Tables) -> Select[Any]:
    job = t.job
    final = [s.value for s in FINAL_STATES]
    return select(job.c.id).where(
        or_(
            and_(job.c.state.in_(final), job.c.finalized_at.is_(None)),
            and_(job.c.state.not_in(final), job.c.finalized_at.is_not(None)),
            and_(job.c.state == JobState.COMPLETED.value, job.c.completed_at.is_(None)),
            and_(job.c.state == JobState.CANCELLED.value, job.c.cancelled_at.is_(None)),
            and_(job.c.state == JobState.DISCARDED.value, job.c.discarded_at.is_(None)),
        )
    )


def _attempts_exceeded(t: Tables) -> Select[Any]:
    job = t.job
    return select(job.c.id).where(
        job.c.kind == JobKind.ONESHOT.value,
        or_(job.c.attempt > job.c.max_attempts, job.c.attempt < 0),
    )


def _slot_shape(t: Tables) -> Select[Any]:
    job = t.job
    return select(job.c.id).where(
        or_(
            and_(
                job.c.kind == JobKind.SLOT.value,
                or_(
                    job.c.namespace.is_(None),
                    job.c.scope.is_(None),
                    job.c.identity_key.is_(None),
                ),
            ),
            and_(
                job.c.kind != JobKind.SLOT.value,
                job.c.state.in_([JobState.PARKED.value, JobState.DISABLED.value]),
            ),
        )
    )


def _waiting_without_upstreams(t: Tables) -> Select[Any]:
    """A ``waiting`` job outside a workflow, or whose upstreams are all accounted for: the
    release moves a job out of ``waiting`` in the transaction that takes its count to 0."""
    job, step = t.job, t.workflow_step
    counted = exists().where(step.c.job_id == job.c.id, step.c.upstreams_pending > 0)
    return select(job.c.id).where(job.c.state == JobState.WAITING.value, ~counted)


Query = Callable[[Tables], Select[Any]]

CHECKS: dict[str, tuple[str, Query]] = {
    "executing_without_lease": (
        "executing without a lease owner, token, expiry or start time",
        _executing_without_lease,
    ),
    "lease_outside_executing": (
        "holding a lease token or expiry while not executing",
        _lease_outside_executing,
    ),
    "executing_without_open_run": (
        "executing without an open run for its lease",
        _executing_without_open_run,
    ),
    "open_run_without_lease": (
        "an open run whose lease the job no longer holds",
        _open_run_without_lease,
    ),
    "several_open_runs": (
        "more than one open run at once",
        _several_open_runs,
    ),
    "final_without_timestamps": (
        "final without its final timestamps (or finalized while not final)",
        _final_without_timestamps,
    ),
    "attempts_exceeded": (
        "a one-shot job with more attempts than its max_attempts",
        _attempts_exceeded,
    ),
    "slot_shape": (
        "a slot without its identity, or a one-shot job parked or disabled",
        _slot_shape,
    ),
    "waiting_without_upstreams": (
        "waiting although no upstream job of its workflow is left to finish",
        _waiting_without_upstreams,
    ),
}
#: Checks that read the workflow tables (migration 0011), skipped on an older schema.
_WORKFLOW_CHECKS = frozenset({"waiting_without_upstreams"})


def find_inconsistencies(db: Database, *, sample: int = SAMPLE) -> list[Inconsistency]:
    """Run every check in one read transaction; an empty list means the database is sound.

    Each :class:`Inconsistency` names the check, says what is wrong and lists up to
    ``sample`` of the jobs concerned.
    """
    found = []
    workflows = db.has_table(db.tables.workflow_step)
    with db.read() as conn:
        for name, (description, query) in CHECKS.items():
            if name in _WORKFLOW_CHECKS and not workflows:
                continue
            ids: tuple[uuid.UUID, ...] = tuple(
                conn.execute(query(db.tables).limit(sample)).scalars()
            )
            if ids:
                found.append(Inconsistency(name, description, ids))
    return found
