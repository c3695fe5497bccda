"""Turning database rows into the engine's read models."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Row

from kickside_engine.models import (
    JOB_FIELDS,
    JOB_KINDS_BY_VALUE,
    JOB_STATES_BY_VALUE,
    Job,
    JobError,
    JobKind,
    JobState,
    Run,
    RunOutcome,
    job_from_values,
)
from kickside_engine.store.sqlite_driver import instant_from_text, row_converters


def job_from_row(row: Row[Any] | Any) -> Job:
    """A :class:`Job` from a ``kickside_job`` row."""
    m = row._mapping
    return Job(
        id=m["id"],
        kind=JobKind(m["kind"]),
        state=JobState(m["state"]),
        queue=m["queue"],
        worker=m["worker"],
        args=m["args"] or {},
        meta=m["meta"] or {},
        tags=list(m["tags"] or []),
        errors=[_error(e) for e in (m["errors"] or [])],
        attempt=m["attempt"],
        max_attempts=m["max_attempts"],
        priority=m["priority"],
        unique_key=m["unique_key"],
        namespace=m["namespace"],
        scope=m["scope"],
        identity_key=m["identity_key"],
        concurrency_key=m["concurrency_key"],
        capacity_group=m["capacity_group"],
        demand_pending=bool(m["demand_pending"]),
        control_pending=bool(m["control_pending"]),
        demand_seq=int(m["demand_seq"]),
        lease_owner=m["lease_owner"],
        lease_token=m["lease_token"],
        lease_expires_at=m["lease_expires_at"],
        rescue_count=m["rescue_count"],
        max_execution_ms=m["max_execution_ms"],
        inserted_at=m["inserted_at"],
        scheduled_at=m["scheduled_at"],
        attempted_at=m["attempted_at"],
        completed_at=m["completed_at"],
        cancelled_at=m["cancelled_at"],
        discarded_at=m["discarded_at"],
        finalized_at=m["finalized_at"],
        updated_at=m["updated_at"],
        result=m.get("result"),
        progress=m.get("progress"),
    )


_INSTANTS = tuple(i for i, name in enumerate(JOB_FIELDS) if name.endswith("_at"))
_KIND, _STATE, _ERRORS = (JOB_FIELDS.index(name) for name in ("kind", "state", "errors"))


def job_from_driver_row(values: Sequence[Any]) -> Job:
    """A :class:`Job` from a PostgreSQL row of every ``kickside_job`` column in table order, as
    psycopg loads it (no SQLAlchemy result processing: for a claim of dozens of jobs that cost
    the pool's turn about as much as the rest of its client work)."""
    v = list(values)
    v[_KIND] = JOB_KINDS_BY_VALUE[v[_KIND]]
    v[_STATE] = JOB_STATES_BY_VALUE[v[_STATE]]
    for i in _INSTANTS:
        at = v[i]
        if at is not None and at.tzinfo is not UTC:
            v[i] = at.astimezone(UTC)  # psycopg gives the session's time zone
    v[_ERRORS] = [_error(e) for e in v[_ERRORS]]
    return job_from_values(v)


@lru_cache(maxsize=16)
def sqlite_job_decoder(tables: Any, dialect: Any) -> Callable[..., Job]:
    """A :class:`Job` from a SQLite row of every ``kickside_job`` column in table order, as
    sqlite3 gives it (ids as hex, instants as text, JSON as text), converted as the columns'
    types would convert it (:mod:`~kickside_engine.store.sqlite_driver`).

    ``decode(values, instants)``: ``instants`` is a memo of the instants read so far, which
    the rows of one claim share (it stamps them with one time; an enqueue stamped them with
    another), so each is parsed once.
    """
    converters = list(enumerate(row_converters(list(tables.job.columns), dialect)))
    instant_columns = [i for i, c in converters if c is instant_from_text]
    converted = [(i, c) for i, c in converters if c is not None and c is not instant_from_text]

    def decode(values: Sequence[Any], instants: dict[Any, Any] | None = None) -> Job:
        memo: dict[Any, Any] = {} if instants is None else instants
        v = list(values)
        for i, convert in converted:
            if v[i] is not None:
                v[i] = convert(v[i])
        for i in instant_columns:
            text = v[i]
            if text is not None:
                made = memo.get(text)
                if made is None:
                    made = memo[text] = instant_from_text(text)
                v[i] = made
        v[_KIND] = JOB_KINDS_BY_VALUE[v[_KIND]]
        v[_STATE] = JOB_STATES_BY_VALUE[v[_STATE]]
        v[_ERRORS] = [_error(e) for e in v[_ERRORS]]
        return job_from_values(v)

    return decode


def _error(entry: dict[str, Any]) -> JobError:
    at = entry.get("at")
    return JobError(
        attempt=int(entry.get("attempt", 0)),
        at=datetime.fromisoformat(at) if isinstance(at, str) else at,  # type: ignore[arg-type]
        error=str(entry.get("error", "")),
    )


def run_from_row(row: Row[Any] | Any) -> Run:
    """A :class:`Run` from a ``kickside_job_run`` row."""
    m = row._mapping
    return Run(
        id=m["id"],
        job_id=m["job_id"],
        attempt=m["attempt"],
        queue=m["queue"],
        worker=m["worker"],
        node=m["node"],
        lease_token=m["lease_token"],
        code_version=m["code_version"],
        queue_ms=m["queue_ms"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        duration_ms=m["duration_ms"],
        outcome=RunOutcome(m["outcome"]) if m["outcome"] else None,
        error=m["error"],
    )
