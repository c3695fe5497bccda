"""Where a benchmark runs: a throwaway PostgreSQL schema or a temporary SQLite file.

Every run gets a fresh location, migrated once; workloads start from empty tables
(:func:`reset`). The PostgreSQL schema is dropped when the run ends, whatever happened.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

from kickside_engine import Database, migrate

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("postgresql", "sqlite")
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class Target:
    """One database location: enough for another process to open it."""

    backend: str
    url: str
    schema: str | None = None

    def open(self, *, pool_size: int = 5) -> Database:
        """A handle on this location (the caller disposes of it)."""
        return Database.from_url(self.url, schema=self.schema, pool_size=pool_size)

    def args(self) -> list[str]:
        """Command-line arguments that name this location (for the pool host process)."""
        args = ["--database-url", self.url]
        if self.schema:
            args += ["--schema", self.schema]
        return args


def schema_name(now: datetime | None = None) -> str:
    """A fresh schema name for one run: ``bench_<UTC timestamp>``."""
    at = now or datetime.now(UTC)
    return f"bench_{at:%Y%m%d_%H%M%S_%f}"


def check_schema_name(name: str) -> str:
    """Refuse schema names that would need quoting (they are interpolated into DDL)."""
    if not _SCHEMA_NAME.match(name):
        raise ValueError(f"invalid --schema {name!r}: use lowercase letters, digits and _")
    return name


def create_schema(url: str, schema: str) -> None:
    """Create an empty PostgreSQL schema (a peer's, which installs its own objects there)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{check_schema_name(schema)}"'))
    finally:
        engine.dispose()


def checkpoint(url: str, progress: Callable[[str], None] | None = None) -> None:
    """Flush the server's dirty buffers (``CHECKPOINT``) so no workload pays for the writes of
    the one before it. Best effort: a role that may not checkpoint only gets a note."""
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text("CHECKPOINT"))
    except Exception as exc:
        if progress is not None:
            progress(f"no CHECKPOINT before the workload: {str(exc).splitlines()[0]}")
    finally:
        engine.dispose()


def drop_schema(url: str, schema: str) -> None:
    """Drop a run's PostgreSQL schema and everything in it."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f'DROP SCHEMA IF EXISTS "{check_schema_name(schema)}" CASCADE'))
    finally:
        engine.dispose()


@contextlib.contextmanager
def postgresql_target(url: str, schema: str | None = None) -> Iterator[Target]:
    """A migrated schema on the PostgreSQL server at ``url``, dropped on exit."""
    name = check_schema_name(schema or schema_name())
    target = Target("postgresql", url, name)
    try:
        _migrate(target)
        yield target
    finally:
        drop_schema(url, name)


@contextlib.contextmanager
def postgresql_database_target(url: str, schema: str | None = None) -> Iterator[Target]:
    """A migrated schema in a database of its own on the server at ``url``, dropped on exit.

    Vacuum cannot remove a dead row that a transaction open anywhere in the same database might
    still see, so a long test or an idle-in-transaction session sharing the database holds the
    run's dead rows in place and its throughput decays for reasons not its own. Other
    databases' transactions do not hold back this one's vacuum.
    """
    name = check_schema_name(schema or schema_name())
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        own_url = make_url(url).set(database=name).render_as_string(hide_password=False)
        with postgresql_target(own_url, name) as target:
            yield target
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextlib.contextmanager
def sqlite_target(path: Path | None = None, synchronous: str | None = None) -> Iterator[Target]:
    """A migrated SQLite file: ``path``, or a temporary file removed on exit; ``synchronous``
    (``?synchronous=`` on its URL) sets Kickside's durability mode, else its default."""
    tmp = None if path is not None else Path(tempfile.mkdtemp(prefix="kickside-bench-"))
    file = path if tmp is None else tmp / "bench.sqlite3"
    query = f"?synchronous={synchronous}" if synchronous else ""
    target = Target("sqlite", f"sqlite:///{file}{query}")
    try:
        _migrate(target)
        yield target
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _migrate(target: Target) -> None:
    db = target.open()
    try:
        migrate.upgrade(db)
    finally:
        db.dispose()


def reset(db: Database) -> None:
    """Empty the job tables (runs, workflow steps and edges too), so a workload starts from
    nothing (pools may be running)."""
    t = db.tables
    # In the order a running pool's turn locks them (the job, then its run, then workflow
    # rows): TRUNCATE locks its tables in list order, and the opposite order deadlocked with a
    # pool's claim (the truncate holding the run table, the claim the job table).
    names = [t.job, t.job_run, t.workflow_step, t.workflow_edge]
    quote = db.engine.dialect.identifier_preparer.format_table
    with db.begin() as conn:
        if db.is_postgresql:
            conn.execute(text(f"TRUNCATE TABLE {', '.join(quote(t) for t in names)}"))
        else:
            for table in names:
                conn.execute(table.delete())


def analyze(db: Database) -> None:
    """Refresh the planner's statistics, as autovacuum would have after a big insert."""
    quote = db.engine.dialect.identifier_preparer.format_table
    with db.begin() as conn:
        for table in (db.tables.job, db.tables.job_run, db.tables.workflow_step):
            conn.execute(text(f"ANALYZE {quote(table)}"))
