"""Settling attempts: fenced by the lease, so only the lease holder can settle a job.

Every update of an executing job is filtered by ``id``, ``state = 'executing'``, the lease owner
and the lease token. A job cancelled, rescued or re-claimed meanwhile no longer matches, so its
late outcome is dropped instead of resurrecting it.

The run row is settled by the same rule: whoever moves a job out of ``executing`` (the lease
holder here, the Lifeline on rescue, an operator's cancel) settles its open run in the same
transaction. So when the fenced job update matches nothing, the run was settled already and the
run update matches nothing either.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, and_, bindparam, column, select, text, update
from sqlalchemy.sql.elements import ClauseElement

from kickside_engine.models import (
    FINAL_STATES,
    PENDING_STATES,
    PURGE_META_KEY,
    JobState,
    RunOutcome,
)
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import Computed, column_values
from kickside_engine.store.sqlite_batches import update_jobs, update_runs, updates_from_supported
from kickside_engine.store.sqlite_driver import driver_statement, execute_many, runs_on_sqlite3
from kickside_engine.store.workflows import release_after_final


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
    #: A slot's settlement: checked against a purge requested while it ran (see
    #: :func:`_respecting_purges`).
    slot: bool = False
    #: A workflow job's settlement: a final one releases the job's downstream jobs in the
    #: same transaction (:func:`_release_workflows`).
    workflow: bool = False


def settle(db: Database, conn: Connection, settlements: Sequence[Settlement]) -> set[uuid.UUID]:
    """Apply settlements through ``conn``; returns the ids of the jobs actually settled."""
    settlements = _respecting_purges(db, conn, settlements)
    settled: set[uuid.UUID] = set()
    for s in settlements:
        stmt, params = _fenced_update(db, s)
        if conn.execute(stmt, params).rowcount == 1:
            settled.add(s.job_id)
    if settled:
        conn.execute(
            _run_settle_statement(db.tables),
            [_run_params(s) for s in settlements if s.job_id in settled],
        )
        _release_workflows(db, conn, [s for s in settlements if s.job_id in settled])
    return settled


def _release_workflows(db: Database, conn: Connection, settlements: Sequence[Settlement]) -> None:
    """Release the downstream jobs of the workflow jobs these settlements made final.

    A settlement whose lease was lost changed nothing, and its job's edges resolve only when
    the job is final in the database, so passing one here is harmless.
    """
    finished = [
        s.job_id for s in settlements if s.workflow and s.values.get("state") in _FINAL_VALUES
    ]
    if finished:
        release_after_final(db, conn, finished, max(s.finished_at for s in settlements))


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
    if not settlements or settle_batch_unnest(db, conn, settlements):
        return
    settlements = _respecting_purges(db, conn, settlements)
    groups: dict[int, tuple[Any, list[dict[str, Any]]]] = {}
    for s in settlements:
        stmt, params = _fenced_update(db, s)
        groups.setdefault(id(stmt), (stmt, []))[1].append(params)
    runs = [_run_params(s) for s in settlements]
    if runs_on_sqlite3(conn) and updates_from_supported(conn):  # the pool's turn on SQLite
        _settle_sqlite_batches(db, conn, list(groups.values()), runs)
    else:
        for stmt, rows in (*groups.values(), (_run_settle_statement(db.tables), runs)):
            conn.execute(stmt, rows)
    _release_workflows(db, conn, settlements)


def _settle_sqlite_batches(
    db: Database,
    conn: Connection,
    groups: Sequence[tuple[Any, list[dict[str, Any]]]],
    runs: list[dict[str, Any]],
) -> None:
    """Each shape of job update, then the runs, in one statement each
    (:mod:`~kickside_engine.store.sqlite_batches`); a shape with values computed in SQL runs
    its statement once per row."""
    for stmt, rows in groups:
        if stmt in _computing_statements:
            execute_many(conn, driver_statement(stmt, conn.dialect), rows)
        else:
            keys = tuple(name[2:] for name in rows[0] if name.startswith("v_"))
            update_jobs(conn, db.tables.job, keys, rows)
    update_runs(conn, db.tables.job_run, runs)


_FINAL_VALUES = frozenset(state.value for state in FINAL_STATES)
#: Where a slot whose purge was requested goes instead of running again.
_SLOT_STATES_THAT_RUN = frozenset(state.value for state in PENDING_STATES)


def _respecting_purges(
    db: Database, conn: Connection, settlements: Sequence[Settlement]
) -> Sequence[Settlement]:
    """Slot settlements, adjusted for purges requested while the slot ran.

    A purge request (``meta[PURGE_META_KEY]``) may arrive after the claim: the settlement,
    computed from the job as claimed, knows nothing of it. Read under the row lock, a request
    parks the slot (whatever the outcome would have scheduled: a retry, a snooze, a follow-up
    run) and survives a settlement that rewrites ``meta``.
    """
    slots = {s.job_id: s for s in settlements if s.slot}
    if not slots:
        return settlements
    job = db.tables.job
    stmt = select(job.c.id, job.c.meta).where(
        job.c.id.in_(sorted(slots)), job.c.state == JobState.EXECUTING.value
    )
    if db.is_postgresql:
        stmt = stmt.with_for_update()
    requests = {
        row.id: row.meta[PURGE_META_KEY]
        for row in conn.execute(stmt)
        if isinstance(row.meta, dict) and row.meta.get(PURGE_META_KEY) is not None
    }
    if not requests:
        return settlements
    adjusted = []
    for s in settlements:
        request = requests.get(s.job_id)
        state = s.values.get("state")
        if request is None or (isinstance(state, str) and state not in _SLOT_STATES_THAT_RUN):
            adjusted.append(s)
            continue
        values = {
            **s.values,
            "state": JobState.PARKED.value,
            "demand_pending": False,
            "control_pending": False,
        }
        if "meta" in values:
            values["meta"] = {**values["meta"], PURGE_META_KEY: request}
        adjusted.append(replace(s, values=values))
    return adjusted


def _fenced_update(db: Database, s: Settlement) -> tuple[Any, dict[str, Any]]:
    """The cached fenced job update for this settlement's shape, and its parameters."""
    plain = _plain_shapes.get((db.tables, tuple(s.values)))
    if plain is not None:
        for value in s.values.values():
            if isinstance(value, _COMPUTED_IN_SQL):
                break
        else:  # every value bound as it is: the usual settlement, made for every job run
            stmt, names = plain
            params = dict(zip(names, s.values.values(), strict=True))
            params.update(_id=s.job_id, _node=s.node, _token=s.lease_token)
            return stmt, params
    values = column_values(db, s.values)
    bound = {k: v for k, v in values.items() if not isinstance(v, ClauseElement)}
    exprs = {k: v for k, v in values.items() if isinstance(v, ClauseElement)}
    shape = (
        db.tables,
        tuple(sorted(bound)),
        tuple(
            sorted(
                (k, str(v.compile(compile_kwargs={"literal_binds": True})))
                for k, v in exprs.items()
            )
        ),
    )
    stmt = _settle_statements.get(shape)
    if stmt is None:
        stmt = _settle_statements[shape] = _settle_statement(db, shape[1], exprs)
        if exprs:
            _computing_statements.add(stmt)
    if not exprs and len(bound) == len(s.values):
        names = tuple(f"v_{k}" for k in s.values)
        _plain_shapes.setdefault((db.tables, tuple(s.values)), (stmt, names))
    params = {
        "_id": s.job_id,
        "_node": s.node,
        "_token": s.lease_token,
        **{f"v_{k}": v for k, v in bound.items()},
    }
    return stmt, params


def _run_params(s: Settlement) -> dict[str, Any]:
    return {
        "token": s.lease_token,
        "finished_at": s.finished_at,
        "duration_ms": s.duration_ms,
        "outcome": s.run_outcome.value,
        "error": s.run_error,
    }


_settle_statements: dict[tuple[Any, ...], Any] = {}
#: The statements among them that compute values in SQL (a batch document cannot carry those).
_computing_statements: set[Any] = set()
#: The shapes whose values are all bound as they are, by their tables and keys in order: their
#: statement and the parameter names of their values (a settlement's parameters in one step).
_plain_shapes: dict[tuple[Any, tuple[str, ...]], tuple[Any, tuple[str, ...]]] = {}


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


# PostgreSQL types of the columns a settlement may set (see settle_batch_unnest).
_PG_TYPES = {
    "state": "text",
    "updated_at": "timestamptz",
    "lease_token": "uuid",
    "lease_expires_at": "timestamptz",
    "finalized_at": "timestamptz",
    "completed_at": "timestamptz",
    "cancelled_at": "timestamptz",
    "discarded_at": "timestamptz",
    "scheduled_at": "timestamptz",
    "unique_key": "text",
    "namespace": "text",
    "scope": "text",
    "identity_key": "text",
    "errors": "jsonb",
    "meta": "jsonb",
    "max_attempts": "int",
    "attempt": "int",
    "demand_pending": "bool",
    "result": "jsonb",
    "progress": "jsonb",
}
_RUN_COLUMNS = '"_token" uuid, "r_finished_at" timestamptz, "r_duration_ms" bigint, ' + (
    '"r_outcome" text, "r_error" text'
)
#: The whole batch travels as one JSON document: encoding it is a few times cheaper than
#: psycopg adapting a dozen arrays, and it keeps the statement text the same whatever the
#: batch size, so it is prepared once.
_BATCH = "jsonb_to_recordset(CAST(:s_batch AS jsonb))"


@lru_cache(maxsize=64)
def _unnest_job_update(job_table: str, keys: tuple[str, ...]) -> str:
    """The fenced job update of a whole batch, its values read from the batch document."""
    sets = ", ".join(f'"{k}" = v."{k}"' for k in keys)
    columns = ", ".join(
        ['"_id" uuid', '"_node" text', '"_token" uuid', *(f'"{k}" {_PG_TYPES[k]}' for k in keys)]
    )
    return (
        f"UPDATE {job_table} AS j SET {sets} "
        f"FROM {_BATCH} AS v({columns}) "
        # IS NOT DISTINCT FROM: the same test as ``=`` for a NOT NULL column, but not one an
        # index can answer, so the planner looks each job up by primary key instead of reading
        # the state index, crowded with entries of jobs that left executing since the last
        # vacuum (it did, and a settle then cost a read of every job drained lately).
        # ``= ANY``: the document's row count is a guess to the planner (100); the id array
        # gives it the primary key to look up instead of a scan.
        "WHERE j.id = ANY(CAST(:s_ids AS uuid[])) AND j.id = v._id "
        # ``OR v._id IS NULL`` (never true: v._id matched j.id) makes the fence a join filter,
        # not a filter of the job scan, whose selectivity the planner would apply to the ids'
        # count: it then expected one job, chose a nested loop and read the whole document
        # once per job (40,000 comparisons for a 200-job batch, two thirds of the turn).
        "AND (j.state IS NOT DISTINCT FROM 'executing' OR v._id IS NULL) "
        "AND j.lease_owner = v._node AND j.lease_token = v._token RETURNING j.id"
    )


def _unnest_run_update(run_table: str) -> str:
    """The run update of a whole batch. It does not depend on the job update: the run-row
    invariant (see the module docstring) makes it match only runs whose job the batch settles.
    """
    return (
        f"UPDATE {run_table} AS r SET finished_at = v.r_finished_at, "
        "duration_ms = v.r_duration_ms, outcome = v.r_outcome, error = v.r_error "
        f"FROM {_BATCH} AS v({_RUN_COLUMNS}) "
        "WHERE r.lease_token = ANY(CAST(:s_tokens AS uuid[])) AND r.lease_token = v._token "
        "AND (r.finished_at IS NULL OR v._token IS NULL)"  # a join filter: see the job update
    )


@lru_cache(maxsize=64)
def _unnest_statement(job_table: str, run_table: str, keys: tuple[str, ...]) -> Any:
    """Settle a batch in one PostgreSQL statement: the fenced job update and the run update."""
    return text(
        f"WITH settled AS ({_unnest_job_update(job_table, keys)}) " + _unnest_run_update(run_table)
    )


@dataclass(frozen=True)
class UnnestSettle:
    """A batch of settlements as one JSON parameter for one PostgreSQL statement."""

    keys: tuple[str, ...]
    params: dict[str, Any]

    def ctes(self, db: Database) -> tuple[Any, Any]:
        """The job and run updates as CTEs, to ride along another statement (a claim)."""
        job, run = _quoted(db.tables.job), _quoted(db.tables.job_run)
        return _unnest_ctes(job, run, self.keys)


@lru_cache(maxsize=64)
def _unnest_ctes(job_table: str, run_table: str, keys: tuple[str, ...]) -> tuple[Any, Any]:
    jobs = text(_unnest_job_update(job_table, keys)).columns(column("id")).cte("settled")
    runs = text(_unnest_run_update(run_table) + " RETURNING r.id").columns(column("id"))
    return jobs, runs.cte("settled_runs")


#: Values the settle computes in SQL, which a batch document cannot carry.
_COMPUTED_IN_SQL = (ClauseElement, Computed)


def _json_value(value: Any) -> Any:
    """The JSON form of a value the encoder does not know (called for those only, by the C
    encoder): a timestamp as ISO 8601, an id as text."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_encode = json.JSONEncoder(ensure_ascii=False, default=_json_value).encode


def _hex(value: uuid.UUID) -> str:
    """An id as PostgreSQL's ``uuid`` reads it: 32 hex digits (a fifth of ``str(value)``'s
    cost, which inserts the dashes in Python)."""
    return f"{value.int:032x}"


def unnest_settle(db: Database, settlements: Sequence[Settlement]) -> UnnestSettle | None:
    """The batch as one JSON document, or None where it does not fit one statement (not
    PostgreSQL, mixed shapes, or values computed in SQL such as slot completions).

    Built on every turn of a busy pool, for every job it ran, so built frugally: ids as bare
    hex digits, the id arrays as one array literal, and each instant written once per batch
    (an attempt's outcome stamps the same instant in several columns, and a batch's outcomes
    often share it).
    """
    if not db.is_postgresql or not settlements or any(s.slot for s in settlements):
        return None  # slots first check for a purge requested while they ran
    if any(s.workflow for s in settlements):
        return None  # workflow jobs release their downstream jobs after the update
    shape = settlements[0].values.keys()
    if not shape <= _PG_TYPES.keys():
        return None
    for s in settlements:
        if s.values.keys() != shape:
            return None
        for v in s.values.values():
            if isinstance(v, _COMPUTED_IN_SQL):
                return None
    keys = tuple(sorted(shape))
    instants: dict[datetime, str] = {}
    rows = []
    ids = []
    tokens = []
    for s in settlements:
        job_id, token = _hex(s.job_id), _hex(s.lease_token)
        ids.append(job_id)
        tokens.append(token)
        row = {
            "_id": job_id,
            "_node": s.node,
            "_token": token,
            "r_finished_at": _iso(s.finished_at, instants),
            "r_duration_ms": s.duration_ms,
            "r_outcome": s.run_outcome.value,
            "r_error": s.run_error,
        }
        for key, value in s.values.items():  # exactly ``keys``; other ids encode below
            row[key] = _iso(value, instants) if type(value) is datetime else value
        rows.append(row)
    return UnnestSettle(
        keys,
        {
            "s_batch": _encode(rows),
            "s_ids": "{" + ",".join(ids) + "}",
            "s_tokens": "{" + ",".join(tokens) + "}",
        },
    )


def _iso(value: datetime, memo: dict[datetime, str]) -> str:
    """``value.isoformat()``, made once per batch for equal instants in UTC (an instant in
    another zone equals its UTC twin, and keeps its own text)."""
    if value.tzinfo is not UTC:
        return value.isoformat()
    text = memo.get(value)
    if text is None:
        text = memo[value] = value.isoformat()
    return text


def settle_batch_unnest(db: Database, conn: Connection, settlements: Sequence[Settlement]) -> bool:
    """On PostgreSQL, settle a batch whose updates share one shape in a single statement.

    Returns False (doing nothing) when the batch does not fit (see :func:`unnest_settle`);
    :func:`settle_batch` then handles it.
    """
    batch = unnest_settle(db, settlements)
    if batch is None:
        return False
    job, run = db.tables.job, db.tables.job_run
    conn.execute(_unnest_statement(_quoted(job), _quoted(run), batch.keys), batch.params)
    return True


def _quoted(table: Any) -> str:
    return f'"{table.schema}"."{table.name}"' if table.schema else f'"{table.name}"'
