"""Job rows as the engine's operations touch them: locked, read, moved and deleted by id.

Every operation that changes a job it has looked at (a wake, an operator's action, a slot's
enrolment, a purge) locks the row first with :func:`lock_job`: ``FOR UPDATE`` on PostgreSQL,
and on SQLite the write transaction's lock, which is held already. It then decides, and moves
the row with :func:`move_job`. Values may be plain, or :class:`Increment` for a counter the
database adds to (so a concurrent change is never lost).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, case, delete, func, or_, select, true, tuple_, update

from kickside_engine.models import Job, JobKind, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.id_sets import id_in
from kickside_engine.store.rows import job_from_row
from kickside_engine.store.workflows import forget_job, is_workflow_job, release_after_final

#: Ids (or identities) per statement: well under every backend's parameter limit.
CHUNK = 300


class Computed:
    """A column value the database computes at the update, from the row as it is then."""

    def expression(self, job: Any, column: str) -> Any:
        """The SQL expression for ``column`` of the job table ``job``."""
        raise NotImplementedError


@dataclass(frozen=True)
class Increment(Computed):
    """The column's value plus ``by`` (a counter: a concurrent change is never lost)."""

    by: int = 1

    def expression(self, job: Any, column: str) -> Any:
        return job.c[column] + self.by


@dataclass(frozen=True)
class AvailableIfWoken(Computed):
    """``available`` if one of the ``wakes`` flag columns (``control_pending``,
    ``demand_pending``) is set on the row at the update, else ``parked``: decided in the
    update itself, because wakes may be committed by others until that very moment."""

    wakes: tuple[str, ...]

    def expression(self, job: Any, column: str) -> Any:
        woken = or_(*(job.c[flag] == true() for flag in self.wakes))
        return case((woken, JobState.AVAILABLE.value), else_=JobState.PARKED.value)


def column_values(db: Database, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` as SQLAlchemy takes them, each :class:`Computed` value as its expression."""
    job = db.tables.job
    return {
        name: value.expression(job, name) if isinstance(value, Computed) else value
        for name, value in values.items()
    }


def lock_job(db: Database, conn: Connection, job_id: uuid.UUID) -> Row[Any] | None:
    """Read one job row and hold its lock until ``conn``'s transaction ends (None: no job)."""
    job = db.tables.job
    stmt = select(job).where(job.c.id == job_id)
    if db.is_postgresql:
        stmt = stmt.with_for_update()
    return conn.execute(stmt).one_or_none()


def lock_jobs(
    db: Database,
    conn: Connection,
    ids: Sequence[uuid.UUID],
    columns: Sequence[str] | None = None,
) -> list[Row[Any]]:
    """Lock these jobs in one global order (by id), so that transactions locking overlapping
    sets never deadlock; returns ``columns`` (default: all) of each row found, by id."""
    job = db.tables.job
    ordered = sorted(set(ids))
    selected = [job.c[name] for name in columns] if columns is not None else list(job.c)
    rows: list[Row[Any]] = []
    for start in range(0, len(ordered), CHUNK):
        stmt = (
            select(*selected).where(job.c.id.in_(ordered[start : start + CHUNK])).order_by(job.c.id)
        )
        if db.is_postgresql:
            stmt = stmt.with_for_update()
        rows.extend(conn.execute(stmt).all())
    return rows


def read_job(db: Database, conn: Connection, job_id: uuid.UUID) -> Job | None:
    """The job with this id as ``conn`` sees it (no lock), or None."""
    job = db.tables.job
    row = conn.execute(select(job).where(job.c.id == job_id)).one_or_none()
    return job_from_row(row) if row is not None else None


def move_job(
    db: Database,
    conn: Connection,
    job_id: uuid.UUID,
    values: Mapping[str, Any],
    *,
    states: Iterable[JobState] | None = None,
    where: Mapping[str, Any] | None = None,
) -> Job | None:
    """Set ``values`` on the job, only while it is in one of ``states`` and its columns equal
    ``where``, when given; returns the job as it is now, or None when it did not match.

    A workflow's job that this move makes final releases its downstream jobs in the same
    transaction (:func:`~kickside_engine.store.workflows.release_after_final`)."""
    job = db.tables.job
    stmt = update(job).where(job.c.id == job_id)
    if states is not None:
        stmt = stmt.where(job.c.state.in_([s.value for s in states]))
    for name, value in (where or {}).items():
        stmt = stmt.where(job.c[name] == value)
    row = conn.execute(stmt.values(**column_values(db, values)).returning(*job.c)).one_or_none()
    if row is None:
        return None
    moved = job_from_row(row)
    if moved.state.is_final and is_workflow_job(moved.meta):
        release_after_final(db, conn, [moved.id], moved.updated_at)
    return moved


def delete_job(db: Database, conn: Connection, job_id: uuid.UUID, now: datetime) -> None:
    """Delete the job row and its run history (a workflow's job: its downstream jobs see it
    as cancelled, see :func:`~kickside_engine.store.workflows.forget_job`)."""
    job, run = db.tables.job, db.tables.job_run
    if db.has_table(db.tables.workflow_step):
        forget_job(db, conn, job_id, now)
    conn.execute(delete(run).where(run.c.job_id == job_id))
    conn.execute(delete(job).where(job.c.id == job_id))


def lock_identity(
    db: Database, conn: Connection, identity: tuple[str, str, str]
) -> Row[Any] | None:
    """The job holding ``(namespace, scope, key)``, locked (None: no job holds it)."""
    job = db.tables.job
    stmt = select(job).where(
        job.c.namespace == identity[0],
        job.c.scope == identity[1],
        job.c.identity_key == identity[2],
    )
    if db.is_postgresql:
        stmt = stmt.with_for_update()
    return conn.execute(stmt).one_or_none()


def ids_with_identities(
    db: Database, conn: Connection, identities: Sequence[tuple[str, str, str]]
) -> set[uuid.UUID]:
    """The ids of the jobs holding any of these identities (no lock)."""
    job = db.tables.job
    identity = tuple_(job.c.namespace, job.c.scope, job.c.identity_key)
    found: set[uuid.UUID] = set()
    for start in range(0, len(identities), CHUNK):
        chunk = [tuple(i) for i in identities[start : start + CHUNK]]
        found.update(conn.execute(select(job.c.id).where(identity.in_(chunk))).scalars())
    return found


def add_demand(
    db: Database,
    conn: Connection,
    ids: Sequence[uuid.UUID],
    *,
    made_due: Iterable[JobState],
    now: datetime,
) -> set[str]:
    """Ordinary demand for locked slot rows: ``demand_pending`` set, ``demand_seq`` bumped, and
    a row in one of ``made_due`` due now; returns the queues of the rows now available."""
    if not ids:
        return set()
    job = db.tables.job
    due = job.c.state.in_([s.value for s in made_due])
    queues: set[str] = set()
    for start in range(0, len(ids), CHUNK):
        rows = conn.execute(
            update(job)
            .where(job.c.id.in_(ids[start : start + CHUNK]))
            .values(
                demand_pending=True,
                demand_seq=job.c.demand_seq + 1,
                state=case((due, JobState.AVAILABLE.value), else_=job.c.state),
                scheduled_at=case((due, now), else_=job.c.scheduled_at),
                updated_at=now,
            )
            .returning(job.c.queue, job.c.state)
        ).all()
        queues.update(r.queue for r in rows if r.state == JobState.AVAILABLE.value)
    return queues


def count_live_nodes(db: Database, conn: Connection, since: datetime) -> int:
    """How many nodes have refreshed their row since ``since``."""
    node = db.tables.node
    return int(conn.execute(select(func.count()).where(node.c.heartbeat_at >= since)).scalar_one())


def read_states(
    db: Database, conn: Connection, ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, JobState]:
    """The state of each of these jobs that exists, in one query whatever their number."""
    job = db.tables.job
    rows = conn.execute(select(job.c.id, job.c.state).where(id_in(db, job.c.id, list(ids))))
    return {r.id: JobState(r.state) for r in rows}


def due_queues(db: Database, conn: Connection, now: datetime) -> list[str]:
    """The queues that hold available jobs due by ``now``, by name."""
    job = db.tables.job
    rows = conn.execute(
        select(job.c.queue)
        .where(job.c.state == JobState.AVAILABLE.value, job.c.scheduled_at <= now)
        .distinct()
    )
    return sorted(r[0] for r in rows)


def due_jobs_by_worker(
    db: Database,
    conn: Connection,
    now: datetime,
    *,
    queue: str | None = None,
    except_workers: Sequence[str] = (),
) -> dict[str, int]:
    """How many available jobs due by ``now`` each worker has (of ``queue``, when given),
    leaving out ``except_workers``."""
    job = db.tables.job
    stmt = (
        select(job.c.worker, func.count())
        .where(
            job.c.state == JobState.AVAILABLE.value,
            job.c.scheduled_at <= now,
            job.c.worker.not_in(list(except_workers)),
        )
        .group_by(job.c.worker)
    )
    if queue is not None:
        stmt = stmt.where(job.c.queue == queue)
    return {worker: count for worker, count in conn.execute(stmt)}


def make_due(db: Database, conn: Connection, now: datetime, *, queue: str | None = None) -> None:
    """Scheduled and retryable jobs (of ``queue``, when given) become due at ``now``, as if
    their time had come (the testing helpers' ``with_scheduled``)."""
    job = db.tables.job
    stmt = update(job).where(
        job.c.state.in_([JobState.SCHEDULED.value, JobState.RETRYABLE.value]),
        job.c.scheduled_at > now,
    )
    if queue is not None:
        stmt = stmt.where(job.c.queue == queue)
    conn.execute(stmt.values(scheduled_at=now, updated_at=now))


def waiting_jobs(db: Database, conn: Connection, state: JobState | None = None) -> list[Job]:
    """Jobs in ``state``, or (None) every job waiting to run: available, scheduled, retryable,
    and parked slots; oldest first."""
    job = db.tables.job
    stmt = select(job).order_by(job.c.inserted_at, job.c.id)
    if state is None:
        waiting = [JobState.AVAILABLE.value, JobState.SCHEDULED.value, JobState.RETRYABLE.value]
        stmt = stmt.where(
            or_(
                job.c.state.in_(waiting),
                and_(job.c.kind == JobKind.SLOT.value, job.c.state == JobState.PARKED.value),
            )
        )
    else:
        stmt = stmt.where(job.c.state == state.value)
    return [job_from_row(r) for r in conn.execute(stmt)]


def read_slots(
    db: Database,
    conn: Connection,
    *,
    namespace: str | None,
    scope: str | None,
    limit: int,
) -> list[Job]:
    """Slot jobs ordered by identity, optionally of one namespace (and scope)."""
    job = db.tables.job
    stmt = (
        select(job)
        # Every slot has an identity: saying so lets the identity index (partial: only jobs
        # with an identity) serve the scan.
        .where(
            job.c.kind == JobKind.SLOT.value,
            job.c.namespace.is_not(None),
            job.c.identity_key.is_not(None),
        )
        .order_by(job.c.namespace, job.c.scope, job.c.identity_key)
        .limit(limit)
    )
    if namespace is not None:
        stmt = stmt.where(job.c.namespace == namespace)
    if scope is not None:
        stmt = stmt.where(job.c.scope == scope)
    return [job_from_row(r) for r in conn.execute(stmt)]


def last_runs(
    db: Database, conn: Connection, job_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, Row[Any]]:
    """The newest run of each of these jobs that has one."""
    if not job_ids:
        return {}
    run = db.tables.job_run
    newest = (
        select(func.max(run.c.id)).where(run.c.job_id.in_(list(job_ids))).group_by(run.c.job_id)
    )
    rows = conn.execute(select(run).where(run.c.id.in_(newest.scalar_subquery())))
    return {r.job_id: r for r in rows}
