"""Recording outcomes: fenced by the lease, so only the lease holder can settle a job.

Every update of an executing job is filtered by ``id``, ``state = 'executing'``, the lease owner
and the lease token. A job cancelled, rescued or re-claimed meanwhile no longer matches, so its
late outcome is dropped instead of resurrecting it.

The run row is settled by the same rule: whoever moves a job out of ``executing`` (the lease
holder here, the Lifeline on rescue, an operator's cancel) settles its open run in the same
transaction. So when the fenced job update matches nothing, the run was settled already and the
run update matches nothing either.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, and_, bindparam, update
from sqlalchemy.sql.elements import ClauseElement

from kickside_engine.models import JobState, RunOutcome
from kickside_engine.store.database import Database


@dataclass(frozen=True)
class Settlement:
    """The new values for one executing job and its run, computed by the lifecycle."""

    job_id: uuid.UUID
    node: str
    lease_token: uuid.UUID
    values: dict[str, Any]
    run_outcome: RunOutcome
    run_error: str | None
    finished_at: datetime
    duration_ms: int
    extra: dict[str, Any] = field(default_factory=dict)


def settle(db: Database, conn: Connection, settlements: Sequence[Settlement]) -> set[uuid.UUID]:
    """Apply settlements through ``conn``; returns the ids of the jobs actually settled."""
    job = db.tables.job
    run = db.tables.job_run
    settled: set[uuid.UUID] = set()
    for s in settlements:
        result = conn.execute(
            update(job)
            .where(
                and_(
                    job.c.id == s.job_id,
                    job.c.state == JobState.EXECUTING.value,
                    job.c.lease_owner == s.node,
                    job.c.lease_token == s.lease_token,
                )
            )
            .values(**s.values)
        )
        if result.rowcount == 1:
            settled.add(s.job_id)
    if settled:
        params = [
            {
                "token": s.lease_token,
                "finished_at": s.finished_at,
                "duration_ms": s.duration_ms,
                "outcome": s.run_outcome.value,
                "error": s.run_error,
            }
            for s in settlements
            if s.job_id in settled
        ]
        conn.execute(
            update(run)
            .where(and_(run.c.lease_token == bindparam("token"), run.c.finished_at.is_(None)))
            .values(
                finished_at=bindparam("finished_at"),
                duration_ms=bindparam("duration_ms"),
                outcome=bindparam("outcome"),
                error=bindparam("error"),
            ),
            params,
        )
    return settled


def settle_open_run(
    db: Database,
    conn: Connection,
    *,
    lease_token: uuid.UUID,
    outcome: RunOutcome,
    now: datetime,
    error: str | None = None,
) -> None:
    """Settle the open run of a lease that someone other than its holder ended."""
    run = db.tables.job_run
    conn.execute(
        update(run)
        .where(and_(run.c.lease_token == lease_token, run.c.finished_at.is_(None)))
        .values(
            finished_at=now,
            outcome=outcome.value,
            error=error,
            duration_ms=None,
        )
    )


def settle_batch(db: Database, conn: Connection, settlements: Sequence[Settlement]) -> None:
    """Apply many settlements with one pipelined executemany per shape of update.

    Unlike :func:`settle` it does not report which jobs matched: it relies on the run-row
    invariant above, so a settlement whose lease was lost changes neither the job nor the run.
    """
    if not settlements:
        return
    groups: dict[tuple[Any, ...], tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for s in settlements:
        bound = {k: v for k, v in s.values.items() if not isinstance(v, ClauseElement)}
        exprs = {k: v for k, v in s.values.items() if isinstance(v, ClauseElement)}
        shape = (
            tuple(sorted(bound)),
            tuple(
                sorted(
                    (k, str(v.compile(compile_kwargs={"literal_binds": True})))
                    for k, v in exprs.items()
                )
            ),
        )
        if shape not in groups:
            groups[shape] = (exprs, [])
        groups[shape][1].append(
            {
                "_id": s.job_id,
                "_node": s.node,
                "_token": s.lease_token,
                **{f"v_{k}": v for k, v in bound.items()},
            }
        )
    for shape, (exprs, params) in groups.items():
        stmt = _settle_statements.get((db.tables, shape))
        if stmt is None:
            stmt = _settle_statement(db, shape[0], exprs)
            _settle_statements[(db.tables, shape)] = stmt
        conn.execute(stmt, params)
    conn.execute(
        _run_settle_statement(db.tables),
        [
            {
                "token": s.lease_token,
                "finished_at": s.finished_at,
                "duration_ms": s.duration_ms,
                "outcome": s.run_outcome.value,
                "error": s.run_error,
            }
            for s in settlements
        ],
    )


_settle_statements: dict[tuple[Any, ...], Any] = {}


def _settle_statement(db: Database, bound_keys: tuple[str, ...], exprs: dict[str, Any]) -> Any:
    """The fenced job update for one shape of settlement (built once, then reused)."""
    job = db.tables.job
    return (
        update(job)
        .where(
            and_(
                job.c.id == bindparam("_id", type_=job.c.id.type),
                job.c.state == JobState.EXECUTING.value,
                job.c.lease_owner == bindparam("_node", type_=job.c.lease_owner.type),
                job.c.lease_token == bindparam("_token", type_=job.c.lease_token.type),
            )
        )
        .values(
            **{k: bindparam(f"v_{k}", type_=job.c[k].type) for k in bound_keys},
            **exprs,
        )
    )


@lru_cache(maxsize=16)
def _run_settle_statement(tables: Any) -> Any:
    run = tables.job_run
    return (
        update(run)
        .where(and_(run.c.lease_token == bindparam("token"), run.c.finished_at.is_(None)))
        .values(
            finished_at=bindparam("finished_at"),
            duration_ms=bindparam("duration_ms"),
            outcome=bindparam("outcome"),
            error=bindparam("error"),
        )
    )
