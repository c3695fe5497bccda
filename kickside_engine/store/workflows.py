"""Workflows in the database: steps, dependency edges, and the release of waiting jobs.

A workflow's jobs are ordinary job rows (their meta names the workflow and the step, see
:data:`WORKFLOW_META`), plus one ``kickside_workflow_step`` row each, holding the count of its
upstream jobs that are not final yet, and one ``kickside_workflow_edge`` row per dependency.

**Release, exactly once.** Whatever takes a workflow's job to a final state (its settle, an
operator's cancel or discard, the Lifeline) calls :func:`release_after_final` in the same
transaction. It resolves the job's unresolved edges (each edge once: the update only matches
``resolved_state IS NULL``, and on PostgreSQL a concurrent resolution of the same edge waits
for the row lock and then finds it resolved), decrements each downstream's counter, and moves
a ``waiting`` downstream whose counter reaches 0 to ``available`` (or ``scheduled``, when its
time is still to come). The decrement is one ``UPDATE ... RETURNING`` of the downstream's step
row: concurrent settles of its last upstreams on different nodes serialize on that row, each
sees the count its own decrement left, and only the one that leaves 0 releases the job.

A downstream whose edge resolved as ``cancelled`` or ``discarded`` with ``on_failure='cancel'``
is cancelled (its error says which upstream failed), which in turn resolves its own edges: the
cancel cascades through the workflow in the same transaction.

**The sweep** (:func:`sweep_unresolved`, run by the Stager) resolves edges whose upstream is
final but whose edges are not, or whose upstream row is gone: the release of a settle by a pool
of an older Kickside (which knows nothing of workflows), or of an upstream deleted by SQL. A
missed release costs a Stager tick, never a job stuck forever.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    case,
    delete,
    func,
    insert,
    literal,
    select,
    update,
)

from kickside_engine.finality import final_values
from kickside_engine.models import FINAL_STATES, JobKind, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.notify import local_signal, notify_in_transaction

#: The key of a workflow job's meta: ``{"id": workflow id, "step": step name}``.
WORKFLOW_META = "workflow"
#: What a downstream does when an upstream ends cancelled or discarded.
ON_FAILURE = ("cancel", "run")
_FINAL = sorted(state.value for state in FINAL_STATES)
_FAILED = frozenset({JobState.CANCELLED.value, JobState.DISCARDED.value})
#: Ids per ``IN (...)`` list (SQLite allows 32,766 bound parameters; PostgreSQL 65,535).
CHUNK = 5_000
#: How many job errors a job keeps (as :data:`kickside_engine.lifecycle.MAX_ERRORS`).
_MAX_ERRORS = 20


def is_workflow_job(meta: Any) -> bool:
    """Whether a job with this meta belongs to a workflow."""
    return isinstance(meta, dict) and WORKFLOW_META in meta


def _chunks(ids: Sequence[uuid.UUID]) -> Iterable[list[uuid.UUID]]:
    for start in range(0, len(ids), CHUNK):
        yield list(ids[start : start + CHUNK])


# --- inserting --------------------------------------------------------------------------------


def workflow_exists(db: Database, conn: Connection, workflow_id: str) -> bool:
    """Whether any job of ``workflow_id`` is stored."""
    step = db.tables.workflow_step
    stmt = select(step.c.job_id).where(step.c.workflow_id == workflow_id).limit(1)
    return conn.execute(stmt).first() is not None


def insert_steps(
    db: Database,
    conn: Connection,
    steps: Sequence[dict[str, Any]],
    edges: Sequence[dict[str, Any]],
) -> None:
    """Insert the step rows (``job_id, workflow_id, step, upstreams, upstreams_pending``) and
    the edge rows (``downstream_id, upstream_id, on_failure``) of jobs just inserted."""
    tables = db.tables
    for start in range(0, len(steps), CHUNK):
        conn.execute(insert(tables.workflow_step), list(steps[start : start + CHUNK]))
    for start in range(0, len(edges), CHUNK):
        rows = [{**e, "resolved_state": None} for e in edges[start : start + CHUNK]]
        conn.execute(insert(tables.workflow_edge), rows)


# --- releasing --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Resolved:
    downstream_id: uuid.UUID
    upstream_id: uuid.UUID
    state: str
    on_failure: str


def release_after_final(
    db: Database,
    conn: Connection,
    job_ids: Iterable[uuid.UUID],
    now: datetime,
    *,
    resolved_as: JobState | None = None,
) -> None:
    """Resolve the edges of these jobs, which this transaction took to a final state, and
    release or cancel their downstream jobs (see the module docstring).

    Ids of jobs that are not final (a settle whose lease was lost) or not in a workflow
    resolve nothing. ``resolved_as`` resolves the edges with that state whatever the jobs' own
    (an upstream being deleted counts as cancelled).
    """
    frontier = sorted(set(job_ids))
    while frontier:
        resolved = _resolve_edges(db, conn, frontier, resolved_as)
        resolved_as = None
        if not resolved:
            return
        counts = Counter(r.downstream_id for r in resolved)
        failed: dict[uuid.UUID, _Resolved] = {}
        for r in resolved:
            if r.state in _FAILED and r.on_failure == "cancel":
                failed.setdefault(r.downstream_id, r)
        pending = _decrement(db, conn, counts)
        ready = sorted(d for d, left in pending.items() if left == 0 and d not in failed)
        _release(db, conn, ready, now)
        frontier = _cancel_downstream(db, conn, failed, now)


def _resolve_edges(
    db: Database,
    conn: Connection,
    upstream_ids: Sequence[uuid.UUID],
    resolved_as: JobState | None,
) -> list[_Resolved]:
    """Mark the unresolved edges of these upstreams with their final state; returns them."""
    edge, job = db.tables.workflow_edge, db.tables.job
    upstream_state = select(job.c.state).where(job.c.id == edge.c.upstream_id).scalar_subquery()
    out: list[_Resolved] = []
    for ids in _chunks(upstream_ids):
        stmt = update(edge).where(edge.c.upstream_id.in_(ids), edge.c.resolved_state.is_(None))
        if resolved_as is None:
            stmt = stmt.where(upstream_state.in_(_FINAL)).values(resolved_state=upstream_state)
        else:
            stmt = stmt.values(resolved_state=resolved_as.value)
        rows = conn.execute(
            stmt.returning(
                edge.c.downstream_id, edge.c.upstream_id, edge.c.resolved_state, edge.c.on_failure
            )
        ).all()
        out.extend(_Resolved(*row) for row in rows)
    return out


def _decrement(db: Database, conn: Connection, counts: Counter[uuid.UUID]) -> dict[uuid.UUID, int]:
    """Take each downstream's resolved edges off its pending count; returns what is left.

    Downstreams are updated in id order (one statement per decrement size, most often one),
    so that transactions releasing overlapping downstreams take their row locks in one order.
    """
    step = db.tables.workflow_step
    by_size: dict[int, list[uuid.UUID]] = defaultdict(list)
    for downstream, n in counts.items():
        by_size[n].append(downstream)
    left: dict[uuid.UUID, int] = {}
    for n, downstreams in sorted(by_size.items()):
        for ids in _chunks(sorted(downstreams)):
            rows = conn.execute(
                update(step)
                .where(step.c.job_id.in_(ids))
                .values(upstreams_pending=step.c.upstreams_pending - n)
                .returning(step.c.job_id, step.c.upstreams_pending)
            ).all()
            left.update((row[0], row[1]) for row in rows)
    return left


def _release(db: Database, conn: Connection, ids: Sequence[uuid.UUID], now: datetime) -> None:
    """Move these waiting jobs to available (scheduled when their time is to come) and wake
    their queues' pools."""
    if not ids:
        return
    job = db.tables.job
    queues: set[str] = set()
    target = case(
        (job.c.scheduled_at <= now, JobState.AVAILABLE.value), else_=JobState.SCHEDULED.value
    )
    for chunk in _chunks(ids):
        rows = conn.execute(
            update(job)
            .where(job.c.id.in_(chunk), job.c.state == JobState.WAITING.value)
            .values(state=target, updated_at=now)
            .returning(job.c.queue, job.c.state)
        ).all()
        queues.update(queue for queue, state in rows if state == JobState.AVAILABLE.value)
    _wake(db, conn, queues)


def _wake(db: Database, conn: Connection, queues: set[str]) -> None:
    """Wake the pools of ``queues``: on PostgreSQL when this transaction commits; on SQLite at
    once, which is safe because a claim is a write transaction that waits for this one's
    write lock, so it sees the commit."""
    signal = None if db.is_postgresql else local_signal(db)
    for queue in sorted(queues):
        notify_in_transaction(db, conn, queue)
        if signal is not None:
            signal.wake(queue)


def _cancel_downstream(
    db: Database, conn: Connection, failed: dict[uuid.UUID, _Resolved], now: datetime
) -> list[uuid.UUID]:
    """Cancel the waiting downstreams of failed upstreams; returns the ids cancelled."""
    if not failed:
        return []
    job, step = db.tables.job, db.tables.workflow_step
    columns = (
        job.c.id,
        job.c.meta,
        job.c.kind,
        job.c.namespace,
        job.c.scope,
        job.c.identity_key,
        job.c.errors,
        job.c.attempt,
    )
    cancelled: list[uuid.UUID] = []
    steps: dict[uuid.UUID, str] = {}
    for upstreams in _chunks(sorted({r.upstream_id for r in failed.values()})):
        found = select(step.c.job_id, step.c.step).where(step.c.job_id.in_(upstreams))
        steps.update((row[0], row[1]) for row in conn.execute(found))
    for ids in _chunks(sorted(failed)):
        stmt = (
            select(*columns)
            .where(job.c.id.in_(ids), job.c.state == JobState.WAITING.value)
            .order_by(job.c.id)
        )
        if db.is_postgresql:
            stmt = stmt.with_for_update()
        for row in conn.execute(stmt).all():
            cause = failed[row.id]
            name = steps.get(cause.upstream_id, "?")
            error = f"cancelled: upstream {name} ({cause.upstream_id}) was {cause.state}"
            values = final_values(
                JobState.CANCELLED,
                now,
                meta=dict(row.meta or {}),
                kind=JobKind(row.kind),
                namespace=row.namespace,
                scope=row.scope,
                identity_key=row.identity_key,
            )
            entry = {"attempt": row.attempt, "at": now.isoformat(), "error": error}
            values.update(updated_at=now, errors=[*(row.errors or []), entry][-_MAX_ERRORS:])
            moved = conn.execute(
                update(job)
                .where(job.c.id == row.id, job.c.state == JobState.WAITING.value)
                .values(**values)
            ).rowcount
            if moved == 1:
                cancelled.append(row.id)
    return cancelled


def sweep_unresolved(db: Database, conn: Connection, now: datetime, batch: int) -> int:
    """Release what settles of workflow-unaware code left behind: resolve the edges of up to
    ``batch`` final (or vanished) upstream jobs whose edges are unresolved. Returns how many
    upstreams it resolved."""
    if not db.has_table(db.tables.workflow_edge):
        return 0
    edge, job = db.tables.workflow_edge, db.tables.job
    final = (
        select(edge.c.upstream_id)
        .join(job, job.c.id == edge.c.upstream_id)
        .where(edge.c.resolved_state.is_(None), job.c.state.in_(_FINAL))
        .distinct()
        .limit(batch)
    )
    gone = (
        select(edge.c.upstream_id)
        .outerjoin(job, job.c.id == edge.c.upstream_id)
        .where(edge.c.resolved_state.is_(None), job.c.id.is_(None))
        .distinct()
        .limit(batch)
    )
    finished = list(conn.execute(final).scalars())
    vanished = list(conn.execute(gone).scalars())
    if finished:
        release_after_final(db, conn, finished, now)
    if vanished:
        release_after_final(db, conn, vanished, now, resolved_as=JobState.CANCELLED)
    return len(finished) + len(vanished)


def forget_job(db: Database, conn: Connection, job_id: uuid.UUID, now: datetime) -> None:
    """Before a workflow job's row is deleted: its downstreams see it as cancelled, and its
    step and edge rows go with it (explicitly: SQLite may run with foreign keys off)."""
    release_after_final(db, conn, [job_id], now, resolved_as=JobState.CANCELLED)
    edge, step = db.tables.workflow_edge, db.tables.workflow_step
    conn.execute(delete(edge).where(edge.c.downstream_id == job_id))
    conn.execute(delete(step).where(step.c.job_id == job_id))


# --- reading ----------------------------------------------------------------------------------


def read_steps(db: Database, conn: Connection, workflow_id: str) -> list[Any]:
    """Each job of the workflow with its step and counts: ``job_id, step, upstreams,
    upstreams_pending``, and the job's ``state, queue, worker, attempt, max_attempts,
    inserted_at, finalized_at, result``, in step order of insertion (by job id)."""
    job, step = db.tables.job, db.tables.workflow_step
    stmt = (
        select(
            step.c.job_id,
            step.c.step,
            step.c.upstreams,
            step.c.upstreams_pending,
            job.c.state,
            job.c.queue,
            job.c.worker,
            job.c.attempt,
            job.c.max_attempts,
            job.c.inserted_at,
            job.c.finalized_at,
            job.c.errors,
        )
        .join(job, job.c.id == step.c.job_id)
        .where(step.c.workflow_id == workflow_id)
        .order_by(step.c.job_id)
    )
    return list(conn.execute(stmt).all())


def read_edges(db: Database, conn: Connection, job_ids: Sequence[uuid.UUID]) -> list[Any]:
    """The edges into these jobs: ``downstream_id, upstream_id, on_failure, resolved_state``."""
    edge = db.tables.workflow_edge
    rows: list[Any] = []
    for ids in _chunks(sorted(job_ids)):
        stmt = select(
            edge.c.downstream_id, edge.c.upstream_id, edge.c.on_failure, edge.c.resolved_state
        ).where(edge.c.downstream_id.in_(ids))
        rows.extend(conn.execute(stmt).all())
    return rows


def read_step(db: Database, conn: Connection, job_id: uuid.UUID) -> Any:
    """The step row of one job (``workflow_id, step, upstreams, upstreams_pending``), or None."""
    if not db.has_table(db.tables.workflow_step):
        return None
    step = db.tables.workflow_step
    stmt = select(
        step.c.workflow_id, step.c.step, step.c.upstreams, step.c.upstreams_pending
    ).where(step.c.job_id == job_id)
    return conn.execute(stmt).one_or_none()


def read_upstreams(db: Database, conn: Connection, job_id: uuid.UUID) -> list[Any]:
    """The upstream jobs of one job: ``id, step, state, result, on_failure``, by step name."""
    job, step, edge = db.tables.job, db.tables.workflow_step, db.tables.workflow_edge
    stmt = (
        select(job.c.id, step.c.step, job.c.state, job.c.result, edge.c.on_failure)
        .select_from(edge)
        .join(job, job.c.id == edge.c.upstream_id)
        .join(step, step.c.job_id == edge.c.upstream_id)
        .where(edge.c.downstream_id == job_id)
        .order_by(step.c.step)
    )
    return list(conn.execute(stmt).all())


def unfinished_upstreams(
    db: Database, conn: Connection, job_id: uuid.UUID, limit: int
) -> list[Any]:
    """Up to ``limit`` upstreams of one job that are not final yet: ``step, state``."""
    job, step, edge = db.tables.job, db.tables.workflow_step, db.tables.workflow_edge
    stmt = (
        select(step.c.step, job.c.state)
        .select_from(edge)
        .join(job, job.c.id == edge.c.upstream_id)
        .join(step, step.c.job_id == edge.c.upstream_id)
        .where(edge.c.downstream_id == job_id, edge.c.resolved_state.is_(None))
        .order_by(step.c.step)
        .limit(limit)
    )
    return list(conn.execute(stmt).all())


# --- retrying -------------------------------------------------------------------------------


def reopen(
    db: Database, conn: Connection, workflow_id: str, retried: Sequence[uuid.UUID]
) -> dict[uuid.UUID, int]:
    """For a workflow retry: the edges out of the ``retried`` jobs are unresolved again, and
    every step's pending count is recounted; returns each step's new count."""
    edge, step = db.tables.workflow_edge, db.tables.workflow_step
    for ids in _chunks(sorted(retried)):
        conn.execute(update(edge).where(edge.c.upstream_id.in_(ids)).values(resolved_state=None))
    unresolved = (
        select(func.count())
        .where(edge.c.downstream_id == step.c.job_id, edge.c.resolved_state.is_(None))
        .scalar_subquery()
    )
    rows = conn.execute(
        update(step)
        .where(step.c.workflow_id == workflow_id)
        .values(upstreams_pending=unresolved)
        .returning(step.c.job_id, step.c.upstreams_pending)
    ).all()
    return {row[0]: row[1] for row in rows}


# --- pruning --------------------------------------------------------------------------------


def plain_job(db: Database, job: Any) -> Any:
    """A condition on ``kickside_job`` rows: the job belongs to no workflow (for the Pruner,
    which deletes a workflow only as a whole); always true on a schema without workflows."""
    if not db.has_table(db.tables.workflow_step):
        return literal(True)
    step = db.tables.workflow_step
    return ~select(step.c.job_id).where(step.c.job_id == job.c.id).exists()


def delete_final_workflows(db: Database, cutoff: datetime, batch: int) -> int:
    """In a transaction of its own, delete up to ``batch`` whole workflows whose jobs are all
    final, the newest finalized before ``cutoff`` (with their runs, steps and edges); returns
    how many jobs were deleted."""
    if not db.has_table(db.tables.workflow_step):
        return 0
    job, step, edge = db.tables.job, db.tables.workflow_step, db.tables.workflow_edge
    run = db.tables.job_run
    old_final = and_(job.c.state.in_(_FINAL), job.c.finalized_at < cutoff)
    # Every workflow's jobs are read at each prune: workflows are pruned as wholes, and a
    # workflow any of whose jobs is open or recent must not stand in the way of older ones.
    ready_workflows = (
        select(step.c.workflow_id)
        .join(job, job.c.id == step.c.job_id)
        .group_by(step.c.workflow_id)
        .having(func.sum(case((old_final, 0), else_=1)) == 0)
        .limit(batch)
    )
    deleted = 0
    with db.begin() as conn:
        for workflow_id in sorted(conn.execute(ready_workflows).scalars()):
            ids = sorted(
                conn.execute(
                    select(step.c.job_id).where(step.c.workflow_id == workflow_id)
                ).scalars()
            )
            # In chunks (a workflow may hold more jobs than some SQLite builds bind at once),
            # locked in id order; re-checked under the locks: an operator may have retried
            # one meanwhile.
            still_open = 0
            for chunk in _chunks(ids):
                locked = select(job.c.id).where(job.c.id.in_(chunk)).order_by(job.c.id)
                if db.is_postgresql:
                    locked = locked.with_for_update()
                conn.execute(locked).all()
                still_open += conn.execute(
                    select(func.count()).where(job.c.id.in_(chunk), ~old_final)
                ).scalar_one()
            if still_open:
                continue
            for chunk in _chunks(ids):
                conn.execute(delete(edge).where(edge.c.downstream_id.in_(chunk)))
                conn.execute(delete(step).where(step.c.job_id.in_(chunk)))
                conn.execute(delete(run).where(run.c.job_id.in_(chunk)))
                deleted += conn.execute(delete(job).where(job.c.id.in_(chunk))).rowcount
    return deleted
