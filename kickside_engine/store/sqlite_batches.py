"""A SQLite turn's rows in one statement each: the batch as a JSON array read by ``json_each``.

``executemany`` runs its statement once per row, and sqlite3 releases the GIL around every
step. In a pool the turn shares the GIL with the supervisor's loop, so each of those steps
waited for the loop to let go again: a turn's statements took 31 µs of wall time per row for
13 µs of CPU. One statement per batch steps once. The values are converted as the columns'
types convert them (:mod:`~kickside_engine.store.sqlite_driver`), then written as JSON; SQLite
reads text, integers and NULL back out of it unchanged, so the rows stored are the ones
``executemany`` stores (tested by comparing both).

``UPDATE ... FROM`` needs SQLite 3.33; on older libraries the callers keep ``executemany``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Dialect, Table

from kickside_engine.models import JobState
from kickside_engine.store.driver_rows import fetch_driver_rows
from kickside_engine.store.sqlite_driver import (
    Converter,
    bind_converter,
    converts_none,
    sqlite_instant,
)

#: The job's fence columns in a settle row, before its new values.
_FENCE = ("_id", "_node", "_token")


def updates_from_supported(conn: Connection) -> bool:
    """Whether ``conn``'s SQLite library runs ``UPDATE ... FROM`` (3.33 and later)."""
    return conn.dialect.dbapi.sqlite_version_info >= (3, 33, 0)  # type: ignore[union-attr, no-any-return]


def open_runs(
    conn: Connection,
    job: Table,
    run: Table,
    ids: Sequence[uuid.UUID],
    *,
    node: str,
    code_version: str | None,
    now: datetime,
) -> None:
    """Open a run row for each job of ``ids``, just claimed in this transaction, in that
    order: its id, attempt, queue, worker and lease token read from the job row itself, with
    ``node``, ``code_version``, ``now`` as its start and the time since the job was due.

    The batch is only the ids: a document of every run column cost SQLite a JSON parse of
    nine values per row and the turn's Python their conversion (4.5 µs a job for the
    statement alone, 2.1 this way). The queue time is computed by SQLite's ``julianday``,
    whose instants keep milliseconds, and rounded to the millisecond as PostgreSQL's claim
    rounds it.
    """
    if not ids:
        return
    params = {
        "ids": _encode([i.hex for i in ids]),
        "node": node,
        "code_version": code_version,
        "now": sqlite_instant(now),
    }
    fetch_driver_rows(conn, _open_runs_sql(job, run), params)


def update_runs(conn: Connection, run: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Settle open runs: each row's ``token`` run, if still open, gets its ``finished_at``,
    ``duration_ms``, ``outcome`` and ``error``."""
    if not rows:
        return
    keys = ("token", "finished_at", "duration_ms", "outcome", "error")
    types = ("lease_token", *keys[1:])
    _run(conn, _run_update_sql(run), _document(conn.dialect, run, keys, types, rows))


def update_jobs(
    conn: Connection, job: Table, keys: tuple[str, ...], rows: Sequence[Mapping[str, Any]]
) -> None:
    """The fenced job update of a batch whose new values all have ``keys``: each row's job
    (``_id``), if still executing under ``_node``'s lease ``_token``, gets ``v_<key>``."""
    if not rows:
        return
    names = (*_FENCE, *(f"v_{k}" for k in keys))
    types = ("id", "lease_owner", "lease_token", *keys)
    _run(conn, _job_update_sql(job, keys), _document(conn.dialect, job, names, types, rows))


def _run(conn: Connection, sql: str, document: str) -> None:
    fetch_driver_rows(conn, sql, {"rows": document})


def _document(
    dialect: Dialect,
    table: Table,
    names: Sequence[str],
    columns: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
) -> str:
    """``rows`` as one JSON array of arrays, each value in ``names`` order converted as the
    column of the same place in ``columns`` stores it."""
    converters = _converters(table, tuple(columns), dialect)
    out = []
    for row in rows:
        values = []
        for name, (convert, none_too) in zip(names, converters, strict=True):
            value = row[name]
            if convert is not None and (value is not None or none_too):
                value = convert(value)
            values.append(value)
        out.append(values)
    return _encode(out)


_encode = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode


@lru_cache(maxsize=64)
def _converters(
    table: Table, columns: tuple[str, ...], dialect: Dialect
) -> list[tuple[Converter | None, bool]]:
    """Each column's converter, and whether it converts None too (a JSON ``null``)."""
    return [
        (bind_converter(table.c[name].type, dialect), converts_none(table.c[name].type, dialect))
        for name in columns
    ]


def _values(columns: Sequence[str]) -> str:
    """The batch as a table: ``json_each`` rows with one named column per value."""
    picks = ", ".join(
        f"json_extract(value, '$[{i}]') AS \"{name}\"" for i, name in enumerate(columns)
    )
    return f"(SELECT {picks} FROM json_each(:rows))"


@lru_cache(maxsize=16)
def _open_runs_sql(job: Table, run: Table) -> str:
    return (
        f'INSERT INTO "{run.name}" (job_id, attempt, queue, worker, node, lease_token, '
        "code_version, queue_ms, started_at) "
        "SELECT j.id, j.attempt, j.queue, j.worker, :node, j.lease_token, :code_version, "
        # julianday keeps milliseconds, in a double: rounded, not truncated (1499.99...).
        "max(0, CAST(round((julianday(:now) - julianday(j.scheduled_at)) * 86400000) AS INTEGER)), "
        # CROSS JOIN: the ids are the outer loop (in their order), each job found by id.
        f':now FROM json_each(:ids) AS v CROSS JOIN "{job.name}" AS j ON j.id = v.value'
    )


@lru_cache(maxsize=16)
def _run_update_sql(run: Table) -> str:
    columns = ("token", "finished_at", "duration_ms", "outcome", "error")
    sets = ", ".join(f'"{c}" = v."{c}"' for c in columns[1:])
    return (
        f'UPDATE "{run.name}" SET {sets} FROM {_values(columns)} AS v '
        f'WHERE "{run.name}".lease_token = v.token AND "{run.name}".finished_at IS NULL'
    )


@lru_cache(maxsize=64)
def _job_update_sql(job: Table, keys: tuple[str, ...]) -> str:
    columns = (*_FENCE, *(f"v_{k}" for k in keys))
    sets = ", ".join(f'"{k}" = v."v_{k}"' for k in keys)
    j = f'"{job.name}"'
    return (
        f"UPDATE {j} SET {sets} FROM {_values(columns)} AS v "
        # ``+`` keeps the state test away from the lease index: by it SQLite read every
        # executing job and, for each, the whole batch; by id it reads the batch once.
        f"WHERE {j}.id = v._id AND +{j}.state = '{JobState.EXECUTING.value}' "
        f"AND {j}.lease_owner = v._node AND {j}.lease_token = v._token"
    )
