"""The claim statement: one UPDATE that moves due jobs to ``executing`` under fresh leases.

It takes the first ``p_limit`` due ``available`` jobs of ``p_queue`` in (priority,
scheduled_at, id) order, optionally only keyless ones, only ``p_workers``' or only ``p_ids``,
and gives each ``attempt + 1``, the lease owner ``p_node``, a fresh fencing token
(:func:`fresh_token_sql`) and the lease expiry ``p_expires``. On PostgreSQL the candidates are
locked ``FOR UPDATE SKIP LOCKED`` and the same statement opens the runs (a data-modifying CTE);
a batch settle can ride along (:func:`claim_and_settle_statement`). Statements are built once
per schema and shape (building costs more than running) and run by
:func:`kickside_engine.store.claims.claim_jobs`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ARRAY,
    JSON,
    BigInteger,
    ColumnElement,
    Dialect,
    Integer,
    String,
    Uuid,
    bindparam,
    cast,
    func,
    insert,
    select,
    update,
)

from kickside_engine.clock import UNIX_EPOCH
from kickside_engine.models import JobState
from kickside_engine.store.tables import Tables
from kickside_engine.store.types import UTCDateTime


def fresh_token_sql(dialect: str) -> Any:
    """A SQL expression yielding a new UUID for each row (the lease's fencing token): a
    UUIDv7, the claim's :func:`token_prefix` (the ``p_token_prefix`` parameter) followed by
    random digits (74 random bits on PostgreSQL, 72 on SQLite).

    The run table's unique index on ``lease_token`` holds every run ever recorded. Random
    tokens put each claim's new entries on as many different pages of it as there are jobs
    in the claim: on SQLite two thirds of the pages a drain's commit wrote were that index's
    (0.92 pages a job; 0.43 with time-ordered tokens, whose entries land together at the
    index's end).
    """
    prefix = bindparam("p_token_prefix", type_=String)
    if dialect == "postgresql":
        # The random UUID's text from its version digit on: 'xxx-Vxxx-xxxxxxxxxxxx', whose
        # variant digit gen_random_uuid() already set.
        rest = func.substr(cast(func.gen_random_uuid(), String), 16)
        return cast(prefix.concat(rest), Uuid())
    # 3 random digits, the variant digit (8: binary 10xx), 15 random digits.
    rest = func.lower(
        func.substr(func.hex(func.randomblob(2)), 2)
        .concat("8")
        .concat(func.substr(func.hex(func.randomblob(8)), 2))
    )
    return prefix.concat(rest)


def token_prefix(now: datetime, dialect: str) -> str:
    """The head of the lease tokens a claim at ``now`` hands out: the 48-bit Unix millisecond
    and the version digit 7 of a UUIDv7 (RFC 9562), as :func:`fresh_token_sql` joins it to
    the random rest (PostgreSQL's with the text form's dashes)."""
    ms = f"{(now - UNIX_EPOCH) // _MILLISECOND:012x}"
    if dialect == "postgresql":
        return f"{ms[:8]}-{ms[8:]}-7"
    return f"{ms}7"


_MILLISECOND = timedelta(milliseconds=1)


@lru_cache(maxsize=64)
def claim_statement(
    tables: Tables, dialect: str, keyless_only: bool, by_worker: bool, by_id: bool = False
) -> Any:
    """The claim statement, built once per schema: building it costs more than running it."""
    return _build_claim(tables, dialect, keyless_only, by_id, by_worker)


@lru_cache(maxsize=64)
def driver_statement(stmt: Any, tables: Tables, dialect: Dialect) -> tuple[str, dict[str, Any]]:
    """A cached PostgreSQL claim as psycopg runs it: its SQL, and the values of the constants
    SQLAlchemy made parameters of. Run this way the rows come back as psycopg loads them,
    for :func:`job_from_driver_row` (so the statement must return every job column in order).

    The claim's own parameters need no SQLAlchemy processing either: :func:`claim_jobs` makes
    its instants aware UTC datetimes, as ``UTCDateTime`` would send them.
    """
    returned = [c.name for c in stmt.selected_columns]
    if returned != list(tables.job.columns.keys()):
        raise AssertionError(f"a claim must return every job column in order, not {returned}")
    compiled = stmt.compile(dialect=dialect)
    return str(compiled), dict(compiled.params)


@lru_cache(maxsize=64)
def claim_and_settle_statement(
    tables: Tables, keyless_only: bool, by_worker: bool, settled_jobs: Any, settled_runs: Any
) -> Any:
    """The PostgreSQL claim with a batch settle riding along as data-modifying CTEs.

    They touch other rows than the claim (executing jobs of this node, their open runs), and
    PostgreSQL runs every data-modifying CTE whether or not the query reads it.
    """
    claim = claim_statement(tables, "postgresql", keyless_only, by_worker, False)
    return claim.add_cte(settled_jobs, settled_runs)


def worker_filter(column: Any, dialect: str) -> ColumnElement[bool]:
    """``column`` is one of the ``p_workers`` parameter's names: one parameter whatever the
    number of workers (an array on PostgreSQL, a JSON array read by ``json_each`` on SQLite),
    so the statement's text is fixed and can run on the driver."""
    matches: ColumnElement[bool]
    if dialect == "postgresql":
        matches = column == func.any(bindparam("p_workers", type_=ARRAY(String)))
    else:
        names = func.json_each(bindparam("p_workers", type_=JSON)).table_valued("value")
        matches = column.in_(select(names.c.value))
    return matches


def _build_claim(
    tables: Tables,
    dialect: str,
    keyless_only: bool,
    by_id: bool,
    by_worker: bool,
) -> Any:
    job: Any = tables.job
    src: Any = tables.job
    if dialect == "postgresql":
        # Short aliases keep the statement under psycopg's 4 KB limit for caching its parse
        # (every column is named twice, and schema-qualified names are long).
        job, src = tables.job.alias("j"), tables.job.alias("c")
    now = bindparam("p_now", type_=UTCDateTime)
    candidates = (
        select(src.c.id, src.c.concurrency_key)
        .where(
            src.c.state == JobState.AVAILABLE.value,
            src.c.queue == bindparam("p_queue", type_=String),
            src.c.scheduled_at <= now,
        )
        .order_by(src.c.priority, src.c.scheduled_at, src.c.id)
        .limit(bindparam("p_limit", type_=Integer))
    )
    if by_worker:
        candidates = candidates.where(worker_filter(src.c.worker, dialect))
    if by_id:  # the ``p_ids`` parameter: one array on PostgreSQL
        if dialect == "postgresql":
            ids = src.c.id == func.any(bindparam("p_ids", type_=ARRAY(Uuid())))
        else:
            ids = src.c.id.in_(bindparam("p_ids", expanding=True))
        candidates = candidates.where(ids)
    if dialect == "postgresql":
        candidates = candidates.with_for_update(skip_locked=True)
    # Materialised, so PostgreSQL runs the locking subquery once: as a plain IN (subquery) it
    # may be re-run per outer row, and claim more than ``limit`` jobs.
    chosen = candidates.cte("candidates").prefix_with("MATERIALIZED", dialect="postgresql")
    # Keyless only among the first ``limit``: a keyed job there is not skipped over in favour
    # of keyless jobs behind it (one claim order for all jobs).
    chosen_ids = select(chosen.c.id)
    if keyless_only:
        chosen_ids = chosen_ids.where(chosen.c.concurrency_key.is_(None))
    # The candidates are still available when the update reaches them: PostgreSQL holds their
    # row locks, and a SQLite statement holds the database's write lock from its start.
    # Repeating the state test here only tempted both planners into reading every available
    # job through the state index instead of the claimed ones by primary key: on SQLite that
    # was the whole backlog at every claim (a 64-job claim from 40,000 due jobs cost 71 µs
    # per job, 22 without the test).
    stmt = update(job).where(job.c.id.in_(chosen_ids))
    stmt = stmt.values(
        state=JobState.EXECUTING.value,
        attempt=job.c.attempt + 1,
        attempted_at=now,
        lease_owner=bindparam("p_node", type_=String),
        lease_token=fresh_token_sql(dialect),
        lease_expires_at=bindparam("p_expires", type_=UTCDateTime),
        # A claim consumes the slot demand present now; demand arriving later re-arms it.
        demand_pending=False,
        control_pending=False,
        # Progress belongs to the live attempt: the previous one's would mislead operators.
        progress=None,
        updated_at=now,
    ).returning(*job.c)
    if dialect == "postgresql":
        return _with_runs(tables, stmt)
    return stmt


def _with_runs(tables: Tables, claim: Any) -> Any:
    """One PostgreSQL statement that claims and opens the runs (a data-modifying CTE)."""
    run = tables.job_run
    now = bindparam("p_now", type_=UTCDateTime)
    claimed = claim.cte("claimed")
    queue_ms = cast(
        func.greatest(0, func.extract("epoch", now - claimed.c.scheduled_at) * 1000),
        BigInteger,
    )
    columns = [
        "job_id",
        "attempt",
        "queue",
        "worker",
        "node",
        "lease_token",
        "code_version",
        "queue_ms",
        "started_at",
    ]
    values = select(
        claimed.c.id,
        claimed.c.attempt,
        claimed.c.queue,
        claimed.c.worker,
        bindparam("p_node", type_=String),
        claimed.c.lease_token,
        bindparam("p_code_version", type_=String),
        queue_ms,
        now,
    )
    runs = insert(run).from_select(columns, values).cte("runs")
    return select(claimed).add_cte(runs)
