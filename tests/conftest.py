"""Fixtures that run every persistence test on SQLite and on PostgreSQL.

PostgreSQL comes from ``KICKSIDE_TEST_POSTGRES_URL`` (default: the local server). Each test gets
its own schema, dropped afterwards. Without a reachable server the PostgreSQL cases skip with the
reason, except under ``CI=true``, where they fail: CI never passes on SQLite alone.
"""

from __future__ import annotations

import logging
import os
import signal
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import Database, connect_database, migrate

PG_URL = os.environ.get(
    "KICKSIDE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
BACKENDS = ("sqlite", "postgresql")


@cache
def _postgres_problem() -> str | None:
    engine = sa.create_engine(PG_URL, connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as exc:
        return f"PostgreSQL not reachable at {PG_URL}: {str(exc).splitlines()[0]}"
    finally:
        engine.dispose()
    return None


def require_postgres() -> None:
    """Skip (or, under CI, fail) when the test PostgreSQL server cannot be reached."""
    problem = _postgres_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{problem} (CI=true: PostgreSQL tests must run)")
    pytest.skip(problem)


@dataclass(frozen=True)
class Target:
    """Where a test's database lives: enough for another process to open it."""

    backend: str
    url: str
    schema: str | None

    def open(self) -> Database:
        return connect_database(self.url, schema=self.schema)

    def cli_args(self) -> list[str]:
        args = ["--database-url", self.url]
        if self.schema:
            args += ["--schema", self.schema]
        return args


def schema_exists(schema: str) -> bool:
    """Whether the test PostgreSQL server has ``schema``."""
    engine = sa.create_engine(PG_URL)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                sa.text("SELECT count(*) FROM pg_namespace WHERE nspname = :s"), {"s": schema}
            ).scalar_one()
    finally:
        engine.dispose()
    return bool(found)


def _drop_schema(schema: str) -> None:
    engine = sa.create_engine(PG_URL)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        engine.dispose()


@pytest.fixture(autouse=True)
def _no_inherited_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables render at their natural width unless a test sets ``COLUMNS`` itself: the
    variable inherited from wherever the suite runs (a terminal, an xdist worker) must not
    decide what a test sees."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _signals_as_a_terminal_leaves_them() -> None:
    """Every test starts with SIGINT and SIGTERM neither ignored nor blocked in this thread,
    and the processes it starts inherit that state.

    In two full CI runs on one machine, from some point on every test that stops a child
    ``kickside`` with Ctrl-C timed out. All of them ran on one xdist worker, and all pass
    alone. A disposition or mask left ignored or blocked by an earlier test is inherited
    through fork and exec, and would explain it. Which test does that is not found yet.
    """
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(autouse=True)
def _kickside_logger_put_back() -> Iterator[None]:
    """Put the ``kickside`` logger back after each test: a command run in-process (the CLI's
    ``worker``) configures it for a terminal, which would hide records from later tests'
    ``caplog``."""
    logger = logging.getLogger("kickside")
    saved = (list(logger.handlers), logger.level, logger.propagate, logger.disabled)
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate, logger.disabled = (
            saved[0],
            saved[1],
            saved[2],
            saved[3],
        )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql":
        require_postgres()
    return str(request.param)


@pytest.fixture
def target(backend: str, tmp_path: Path) -> Iterator[Target]:
    """An empty, isolated database location on the test's backend.

    On SQLite an empty file (a database never migrated), as on PostgreSQL an empty schema in
    an existing database: most commands refuse a file that does not exist.
    """
    if backend == "sqlite":
        path = tmp_path / "kickside.sqlite3"
        path.touch()
        yield Target("sqlite", f"sqlite:///{path}", None)
        return
    schema = f"kst_{uuid.uuid4().hex[:16]}"
    try:
        yield Target("postgresql", PG_URL, schema)
    finally:
        _drop_schema(schema)


@pytest.fixture
def empty_db(target: Target) -> Iterator[Database]:
    """A database handle with no Kickside tables yet."""
    db = target.open()
    try:
        yield db
    finally:
        db.dispose()


@pytest.fixture
def db(empty_db: Database) -> Database:
    """A database handle migrated to head."""
    migrate.upgrade(empty_db)
    return empty_db
