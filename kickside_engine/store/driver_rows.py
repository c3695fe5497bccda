"""Statements run on a ``Connection``'s driver cursor, their rows returned as the driver loads
them: the pool's hot statements (claims, SQLite's batch settles and run starts), built once with
SQLAlchemy and compiled, skip its per-execution work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection

from kickside_engine.store.driver_errors import connection_error


def fetch_driver_rows(conn: Connection, sql: str, params: Mapping[str, Any]) -> Sequence[Any]:
    """Run a compiled statement (:func:`~kickside_engine.store.claim_statement.driver_statement`,
    :func:`~kickside_engine.store.sqlite_driver.driver_statement`) on ``conn``'s driver cursor
    and return every row.

    ``Connection.exec_driver_sql`` builds result metadata from the cursor's description at
    every run of a textual statement: for the claim's 36 columns that was about 0.3 ms per
    turn, most of the client CPU of a turn that claims one job (an idle pool's, which sets the
    pick-up latency). On PostgreSQL ``conn`` must autocommit (the turn connection): the driver
    commits each statement by itself; on SQLite the statement runs in ``conn``'s transaction
    (:mod:`~kickside_engine.store.sqlite_driver`). Driver errors are raised as SQLAlchemy's,
    as the ``Connection`` would raise them; the caller discards a connection whose statement
    failed.
    """
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, params)
        return cursor.fetchall()
    except conn.dialect.loaded_dbapi.Error as exc:
        raise connection_error(conn, exc, sql, params, cursor) from exc
    finally:
        cursor.close()
