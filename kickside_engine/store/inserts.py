"""Writing new job rows: one at a time (with identity and uniqueness), many at once, and COPY.

Every insert wakes pools everywhere when its transaction commits: on PostgreSQL a
``pg_notify`` per queue inside the transaction (riding on the INSERT itself for a single job),
on SQLite nothing (pools there poll, and the caller wakes this process's pools at once).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, String, bindparam, func, insert, select

from kickside_engine.errors import ConflictError, InvalidArgumentError
from kickside_engine.models import Inserted, JobState
from kickside_engine.store.copy_text import encode_json
from kickside_engine.store.database import Database
from kickside_engine.store.notify import channel_name, notify_in_transaction
from kickside_engine.store.sqlite_driver import positional_statement
from kickside_engine.store.tables import Tables

#: Rows from which a bulk insert on PostgreSQL streams with COPY instead of INSERT.
COPY_FROM_ROWS = 50
#: The JSON columns, and their text when empty (most rows: no tags, no errors yet, no meta).
_EMPTY_JSON = {"args": "{}", "meta": "{}", "tags": "[]", "errors": "[]"}
_JSON_COLUMNS = frozenset(_EMPTY_JSON)
#: Lines handed to COPY at a time.
_COPY_CHUNK = 1_000
_UNIQUE_ATTEMPTS = 5


def single_statement(db: Database, row: dict[str, Any]) -> bool:
    """Whether :func:`insert_job` writes this row in a single statement (no uniqueness or
    identity to check first), so that it may run on its own, autocommitted."""
    return (
        row["unique_key"] is None and row["identity_key"] is None and not db.engine.dialect.is_async
    )


def insert_job_autocommit(db: Database, row: dict[str, Any]) -> None:
    """Insert a row :func:`single_statement` accepts as one statement that commits by itself,
    straight to the driver: no ``Connection`` layer, no BEGIN and COMMIT round (SQLAlchemy's
    per-call work was a third of a single enqueue on PostgreSQL and two thirds on SQLite).

    On PostgreSQL the NOTIFY rides along; on SQLite the caller wakes pools after it returns.
    """
    db.execute_autocommit(*single_insert_statement(db, row))


def single_insert_statement(
    db: Database, row: dict[str, Any]
) -> tuple[str, dict[str, Any] | list[Any]]:
    """The driver-level statement and parameters :func:`insert_job_autocommit` sends for
    ``row``: on PostgreSQL the INSERT with its NOTIFY (psycopg's named style), on SQLite the
    plain INSERT with ``?`` parameters in the row's order, the values converted as the
    columns' types convert them."""
    if db.is_postgresql:
        return _insert_and_notify_sql(db, tuple(row)), _insert_params(db, row)
    keys = tuple(row)
    insert_row = positional_statement(
        _sqlite_insert(db.tables, keys), db.engine.dialect, _param_names(keys)
    )
    return insert_row.sql, insert_row.params(row.values())


def insert_job(db: Database, conn: Connection, row: dict[str, Any]) -> Inserted:
    """Insert one job row through ``conn``.

    A row with an identity is refused (:class:`ConflictError`) while another job holds it; a
    row with a unique key that another job holds is not inserted, and that job is returned
    with ``duplicate=True``.
    """
    table = db.tables.job
    state = JobState(row["state"])
    if row["identity_key"] is not None:
        holder = conn.execute(
            select(table.c.id, table.c.state).where(
                table.c.namespace == row["namespace"],
                table.c.scope == row["scope"],
                table.c.identity_key == row["identity_key"],
            )
        ).one_or_none()
        if holder is not None:
            raise ConflictError(
                f"identity {row['namespace']}/{row['scope']}/{row['identity_key']} is held by "
                f"job {holder.id} ({holder.state})",
                {"identity_in_use": True, "job_id": str(holder.id), "state": holder.state},
            )
    if row["unique_key"] is None:
        if db.is_postgresql:
            # One round trip: the NOTIFY rides on the INSERT (delivered at commit).
            conn.exec_driver_sql(_insert_and_notify_sql(db, tuple(row)), _insert_params(db, row))
        else:
            conn.execute(insert(table), row)
            notify_in_transaction(db, conn, row["queue"])
        return Inserted(id=row["id"], duplicate=False, state=state)
    stmt = _insert_ignoring_unique_conflict(db).returning(table.c.id)
    for _ in range(_UNIQUE_ATTEMPTS):
        inserted = conn.execute(stmt, row).scalar_one_or_none()
        if inserted is not None:
            notify_in_transaction(db, conn, row["queue"])
            return Inserted(id=inserted, duplicate=False, state=state)
        existing = conn.execute(
            select(table.c.id, table.c.state).where(table.c.unique_key == row["unique_key"])
        ).one_or_none()
        if existing is not None:
            return Inserted(id=existing.id, duplicate=True, state=JobState(existing.state))
        # The holder reached a final state and released its key between the two statements.
    raise InvalidArgumentError("unique insert kept conflicting with a job that vanished; retry")


def _insert_ignoring_unique_conflict(db: Database) -> Any:
    table = db.tables.job
    return db.upsert_insert(table).on_conflict_do_nothing(
        index_elements=["unique_key"], index_where=table.c.unique_key.is_not(None)
    )


def _insert_params(db: Database, row: dict[str, Any]) -> dict[str, Any]:
    """The parameters of :func:`_insert_and_notify_sql` for ``row``; JSON goes as text, cast
    by the statement."""
    params = {
        name: (encode_json(value) if value else _EMPTY_JSON[key]) if key in _EMPTY_JSON else value
        for (key, value), name in zip(row.items(), _param_names(tuple(row)), strict=True)
    }
    params["p_channel"] = channel_name(db)
    return params


@lru_cache(maxsize=16)
def _param_names(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"p_{k}" for k in keys)


def _insert_and_notify_sql(db: Database, keys: tuple[str, ...]) -> str:
    """:func:`_insert_and_notify` compiled for PostgreSQL (psycopg's ``%(name)s`` style)."""
    return _compiled_insert_and_notify(db.tables, db.engine.dialect, keys)


@lru_cache(maxsize=16)
def _compiled_insert_and_notify(tables: Tables, dialect: Any, keys: tuple[str, ...]) -> str:
    return str(_insert_and_notify(tables, keys).compile(dialect=dialect))


@lru_cache(maxsize=16)
def _insert_and_notify(tables: Tables, keys: tuple[str, ...]) -> Any:
    """``WITH inserted AS (INSERT … RETURNING queue) SELECT pg_notify(channel, queue)``."""
    job = tables.job
    inserted = (
        insert(job)
        .values({k: bindparam(f"p_{k}", type_=job.c[k].type) for k in keys})
        .returning(job.c.queue)
        .cte("inserted")
    )
    return select(func.pg_notify(bindparam("p_channel", type_=String), inserted.c.queue))


@lru_cache(maxsize=16)
def _sqlite_insert(tables: Tables, keys: tuple[str, ...]) -> Any:
    """The plain INSERT of a row with ``keys`` (``p_<key>`` parameters), for sqlite3."""
    job = tables.job
    return insert(job).values({k: bindparam(f"p_{k}", type_=job.c[k].type) for k in keys})


def insert_rows(db: Database, conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert built rows through ``conn`` (COPY on PostgreSQL from :data:`COPY_FROM_ROWS`)
    and notify their queues."""
    if db.is_postgresql and len(rows) >= COPY_FROM_ROWS:
        copy_rows(db, conn, rows)
    else:
        conn.execute(insert(db.tables.job), rows)
    notify_queues(db, conn, {r["queue"] for r in rows})


def notify_queues(db: Database, conn: Connection, queues: set[str]) -> None:
    """Wake the pools of these queues when ``conn``'s transaction commits."""
    for queue in sorted(queues):
        notify_in_transaction(db, conn, queue)


def copy_rows(db: Database, conn: Connection, rows: Iterable[dict[str, Any]]) -> None:
    """Stream rows into the job table with COPY, inside ``conn``'s transaction (PostgreSQL).

    Several times faster than a pipelined INSERT per row: one statement, no per-row round of
    parse, bind and execute on the server. Every row has the keys of the first (build_row's).
    """
    stream = iter(rows)
    first = next(stream, None)
    if first is None:
        return
    columns = list(first)
    table = db.engine.dialect.identifier_preparer.format_table(db.tables.job)
    names = ", ".join(f'"{c}"' for c in columns)
    json_at = [i for i, c in enumerate(columns) if c in _JSON_COLUMNS]
    with _copy(conn, f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in itertools.chain((first,), stream):
            values = list(row.values())
            for i in json_at:
                value = values[i]
                values[i] = encode_json(value) if value else ("{}" if value == {} else "[]")
            copy.write_row(values)


def copy_lines(db: Database, conn: Connection, columns: list[str], lines: Iterator[str]) -> None:
    """Stream lines already in COPY's text format (one job each, ``columns`` in order) into
    the job table, inside ``conn``'s transaction (PostgreSQL)."""
    table = db.engine.dialect.identifier_preparer.format_table(db.tables.job)
    names = ", ".join(f'"{c}"' for c in columns)
    with _copy(conn, f"COPY {table} ({names}) FROM STDIN") as copy:
        while chunk := "".join(itertools.islice(lines, _COPY_CHUNK)):
            copy.write(chunk)


@contextlib.contextmanager
def _copy(conn: Connection, statement: str) -> Iterator[Any]:
    """psycopg's ``Copy`` of ``statement`` on ``conn``'s driver connection.

    On an async engine's connection (a sync ``Connection`` handed over by ``run_sync``) the
    driver's copy is asynchronous: each call is awaited through SQLAlchemy's greenlet bridge,
    so the same COPY code streams on either kind of connection.
    """
    driver: Any = conn.connection.driver_connection
    if not conn.dialect.is_async:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            yield copy
        return
    from sqlalchemy.util import await_only

    cursor = driver.cursor()
    try:
        manager = cursor.copy(statement)
        copy = await_only(manager.__aenter__())
        try:
            yield _AwaitedCopy(copy)
        except BaseException as exc:
            if not await_only(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            await_only(manager.__aexit__(None, None, None))
    finally:
        await_only(cursor.close())


class _AwaitedCopy:
    """psycopg's ``AsyncCopy`` with the sync ``Copy``'s methods (each call awaited)."""

    __slots__ = ("_copy",)

    def __init__(self, copy: Any) -> None:
        self._copy = copy

    def write(self, buffer: str) -> None:
        from sqlalchemy.util import await_only

        await_only(self._copy.write(buffer))

    def write_row(self, row: Any) -> None:
        from sqlalchemy.util import await_only

        await_only(self._copy.write_row(row))


def insert_slot(db: Database, conn: Connection, row: dict[str, Any]) -> Any:
    """Insert a slot row unless a job holds its identity already: the new id, or None.

    The conflict is skipped, not raised, so processes enrolling one identity at once end
    with one row (the losers then lock and update it).
    """
    job = db.tables.job
    stmt = (
        db.upsert_insert(job)
        .on_conflict_do_nothing(
            index_elements=["namespace", "scope", "identity_key"],
            index_where=job.c.identity_key.is_not(None),  # the index is partial
        )
        .returning(job.c.id)
    )
    return conn.execute(stmt, row).scalar_one_or_none()
