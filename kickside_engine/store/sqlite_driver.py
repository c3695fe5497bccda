"""SQLite statements run on sqlite3 directly: the pool's turn without SQLAlchemy's per-row work.

A turn on SQLite settles and claims dozens of jobs in one transaction. Run through a
``Connection``, each row of each ``executemany`` paid for SQLAlchemy's parameter construction
and its types' processors (about half of the turn's Python time), and each claimed row for
result processing. Here a statement built with SQLAlchemy is compiled once (sqlite3's named
``:name`` parameters) and run on the transaction's own driver connection, its parameters
converted by :func:`bind_converter`: for Kickside's column types the conversion the type's
processor makes, written for the value at hand (an aware UTC instant, a UUID, an empty JSON
document); for any other type, the type's own processor. Rows read back are converted by
:func:`result_converter` the same way. So what is stored and read is exactly what the
``Connection`` would store and read (tested value by value against SQLAlchemy's processors),
and the statements still run in the caller's transaction. A single enqueue's INSERT is
converted the same way (:func:`kickside_engine.store.inserts.insert_job_autocommit`).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, Connection, Dialect, Uuid
from sqlalchemy.dialects import sqlite

from kickside_engine.ids import uuid_from_int
from kickside_engine.store.driver_errors import connection_error
from kickside_engine.store.driver_rows import fetch_driver_rows
from kickside_engine.store.types import UTCDateTime, as_utc

Converter = Callable[[Any], Any]

#: SQLite's dialect rendering sqlite3's named parameters (``:name``) instead of ``?``.
NAMED_SQLITE = sqlite.dialect(paramstyle="named")


@dataclass(frozen=True)
class DriverStatement:
    """A compiled statement for sqlite3: its SQL, the values of the constants SQLAlchemy made
    parameters of (converted), and a converter per parameter (None: the value goes as is)."""

    sql: str
    constants: Mapping[str, Any]
    converters: Mapping[str, Converter | None]
    #: Parameters whose type stores None as something else (a JSON ``null``).
    converts_none: frozenset[str] = frozenset()

    def params(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The driver's parameters for ``values`` (every parameter that is not a constant)."""
        params = dict(self.constants)
        converters = self.converters
        for name, value in values.items():
            convert = converters.get(name)
            if convert is None or (value is None and name not in self.converts_none):
                params[name] = value
            else:
                params[name] = convert(value)
        return params


@lru_cache(maxsize=128)
def driver_statement(stmt: Any, dialect: Dialect) -> DriverStatement:
    """``stmt`` (a cached SQLAlchemy statement without expanding parameters) for sqlite3."""
    compiled = stmt.compile(dialect=NAMED_SQLITE)
    binds = {name: bind for bind, name in compiled.bind_names.items()}
    if any(bind.expanding for bind in binds.values()):
        raise ValueError("a statement with an expanding parameter has no fixed SQL")
    converters = {name: bind_converter(bind.type, dialect) for name, bind in binds.items()}
    none_converted = frozenset(
        name for name, bind in binds.items() if converts_none(bind.type, dialect)
    )
    unconverted = DriverStatement(str(compiled), {}, converters, none_converted)
    constants = {
        name: bind.effective_value
        for name, bind in binds.items()
        if not bind.required and bind.callable is None
    }
    return replace(unconverted, constants=unconverted.params(constants))


#: SQLite's dialect rendering ``?`` parameters, in the order :class:`PositionalStatement` fills.
QMARK_SQLITE = sqlite.dialect(paramstyle="qmark")


@dataclass(frozen=True)
class PositionalStatement:
    """A compiled statement for sqlite3 whose ``?`` parameters take a row's values in a fixed
    order, each converted as :class:`DriverStatement` converts it: one row sent with the
    least work in Python (a single enqueue's INSERT)."""

    sql: str
    converters: tuple[Converter | None, ...]
    #: Per position: whether the type stores None as something else (a JSON ``null``).
    converts_none: tuple[bool, ...]

    def params(self, values: Iterable[Any]) -> list[Any]:
        """The driver's parameters for ``values``, in the statement's order."""
        pairs = zip(values, self.converters, self.converts_none, strict=True)
        return [
            value if convert is None or (value is None and not none) else convert(value)
            for value, convert, none in pairs
        ]


@lru_cache(maxsize=32)
def positional_statement(
    stmt: Any, dialect: Dialect, names: tuple[str, ...]
) -> PositionalStatement:
    """``stmt`` (cached, every parameter a required bind) for sqlite3 with ``?`` parameters,
    taking the values of the binds ``names`` in that order."""
    compiled = stmt.compile(dialect=QMARK_SQLITE)
    if tuple(compiled.positiontup or ()) != names:
        raise ValueError(f"the statement's parameters are {compiled.positiontup}, not {names}")
    binds = {name: bind for bind, name in compiled.bind_names.items()}
    return PositionalStatement(
        str(compiled),
        tuple(bind_converter(binds[name].type, dialect) for name in names),
        tuple(converts_none(binds[name].type, dialect) for name in names),
    )


def converts_none(type_: Any, dialect: Dialect) -> bool:
    """Whether ``type_`` stores None as something else than NULL (a JSON ``null``)."""
    process = type_.dialect_impl(dialect).bind_processor(dialect)
    return process is not None and process(None) is not None


def runs_on_sqlite3(conn: Connection) -> bool:
    """Whether ``conn`` is a synchronous sqlite3 connection these functions can drive (an
    aiosqlite connection behind an async engine is not)."""
    return conn.dialect.name == "sqlite" and not conn.dialect.is_async


def fetch_rows(conn: Connection, ds: DriverStatement, values: Mapping[str, Any]) -> list[Any]:
    """Run ``ds`` once on ``conn``'s driver connection (in its transaction); every row."""
    return list(fetch_driver_rows(conn, ds.sql, ds.params(values)))


def execute_many(conn: Connection, ds: DriverStatement, rows: Iterable[Mapping[str, Any]]) -> None:
    """Run ``ds`` once per row of ``rows`` on ``conn``'s driver connection (in its
    transaction)."""
    batch = [ds.params(values) for values in rows]
    if not batch:
        return
    cursor = conn.connection.cursor()
    try:
        cursor.executemany(ds.sql, batch)
    except conn.dialect.loaded_dbapi.Error as exc:
        raise connection_error(conn, exc, ds.sql, batch[0], cursor) from exc
    finally:
        cursor.close()


def bind_converter(type_: Any, dialect: Dialect) -> Converter | None:
    """What ``type_``'s bind processor does to a value that is not None, as one call."""
    if isinstance(type_, UTCDateTime):
        return sqlite_instant
    if isinstance(type_, Uuid) and type_.as_uuid:
        return _uuid_hex
    process = type_.dialect_impl(dialect).bind_processor(dialect)
    if isinstance(type_, JSON):
        return _empty_or(process)
    return process  # type: ignore[no-any-return]


def sqlite_instant(value: datetime) -> str:
    """An aware instant as ``UTCDateTime`` stores it on SQLite: naive UTC text, microseconds
    always written (SQLAlchemy's ``DATETIME`` storage format)."""
    global _last_instant
    last, text = _last_instant
    if value is last:  # a batch repeats its instants (every run of a claim starts at once)
        return text
    if value.tzinfo is not UTC:
        value = as_utc(value)  # refuses a naive one
    text = value.isoformat(" ", "microseconds")[:-6]  # without its "+00:00"
    _last_instant = (value, text)
    return text


#: The last instant :func:`sqlite_instant` wrote, and its text (one tuple: threads may share it).
_last_instant: tuple[datetime | None, str] = (None, "")


def _uuid_hex(value: Any) -> str:
    return value.hex if isinstance(value, uuid.UUID) else uuid.UUID(str(value)).hex


_EMPTY_DOCUMENTS: dict[type, str] = {dict: "{}", list: "[]"}


def _empty_or(process: Converter | None) -> Converter | None:
    """A JSON processor that writes an empty dict or list without calling the serializer."""
    if process is None:
        return None

    def convert(value: Any) -> Any:
        if not value and type(value) in _EMPTY_DOCUMENTS:
            return _EMPTY_DOCUMENTS[type(value)]
        return process(value)

    return convert


def result_converter(type_: Any, dialect: Dialect) -> Converter | None:
    """What ``type_``'s result processor does to a stored value that is not None, as one
    call."""
    if isinstance(type_, UTCDateTime):
        return instant_from_text
    if isinstance(type_, Uuid) and type_.as_uuid:
        return _uuid_from_text
    process = type_.dialect_impl(dialect).result_processor(dialect, None)
    if isinstance(type_, JSON):
        return _empty_from_text(process)
    return process  # type: ignore[no-any-return]


def instant_from_text(value: Any) -> datetime:
    """An instant as SQLite stores it (naive UTC text), aware in UTC."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    return UTCDateTime().process_result_value(value, NAMED_SQLITE)  # type: ignore[return-value]


def _uuid_from_text(value: Any) -> uuid.UUID:
    """An id as SQLite stores it (32 hex digits) as a UUID; any other form through ``UUID``."""
    if type(value) is str and len(value) == 32:
        return uuid_from_int(int(value, 16))  # what UUID(value) does, without its checks
    return value if isinstance(value, uuid.UUID) else uuid.UUID(value)


def _empty_from_text(process: Converter | None) -> Converter:
    """A JSON result processor that reads ``{}`` and ``[]`` without a parse."""
    parse = process if process is not None else json.loads

    def convert(value: Any) -> Any:
        if value == "{}":
            return {}
        if value == "[]":
            return []
        return parse(value)

    return convert


def row_converters(columns: Sequence[Any], dialect: Dialect) -> tuple[Converter | None, ...]:
    """One :func:`result_converter` per column, in order."""
    return tuple(result_converter(c.type, dialect) for c in columns)
