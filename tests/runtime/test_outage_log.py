"""A database outage reads as a handful of lines: one as it begins and one as it ends per client
(the pool's loop, its plugins, its LISTEN connection), no traceback, and the plugins resume.

A flood (a traceback from every plugin every second: 89 in 23 s) hid whatever else the log said
at the moment an operator most needed it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from kickside_engine import (
    Database,
    Job,
    JobBuilder,
    JobState,
    WorkerRegistry,
    connect_database,
    enqueue,
    get_job,
    migrate,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import list_nodes, list_runs
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.store import engines

from ..conftest import PG_URL, Target
from ..support.processes import wait_for
from ..support.tcp_proxy import Proxy

pytestmark = pytest.mark.slow

OUTAGE_SECONDS = 6.0
UNAVAILABLE = "database unavailable, retrying in"
BACK = "database back after"


class Captured(logging.Handler):
    """Every record of the ``kickside`` loggers, from a chosen moment on."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._guard:
            self.records.append(record)

    def since(self, index: int, level: int = logging.INFO) -> list[logging.LogRecord]:
        with self._guard:
            return [r for r in self.records[index:] if r.levelno >= level]

    def mark(self) -> int:
        with self._guard:
            return len(self.records)


@contextmanager
def captured() -> Iterator[Captured]:
    handler = Captured()
    root = logging.getLogger("kickside")
    level = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _records(records: list[logging.LogRecord], logger: str, prefix: str) -> list[logging.LogRecord]:
    return [r for r in records if r.name == logger and r.getMessage().startswith(prefix)]


def _lines(records: list[logging.LogRecord], logger: str, prefix: str) -> list[str]:
    return [r.getMessage() for r in _records(records, logger, prefix)]


def _pool(db: Database, node: str) -> WorkerPool:
    registry = WorkerRegistry()

    @registry.worker("noop")
    def noop(args: dict[str, Any], job: Job) -> None:
        return None

    return WorkerPool(
        db, PoolConfig(queues={"default": 2}, mode="thread", registry=registry, node=node)
    )


def _registered(db: Database, node: str) -> bool:
    return any(n.name == node for n in list_nodes(db, utcnow()))


def _started_at(db: Database, job_id: Any) -> datetime | None:
    runs = list_runs(db, job_id)
    return runs[0].started_at if runs else None


def test_a_postgresql_outage_is_two_lines_per_client_and_the_plugins_resume_after(
    target: Target, db: Database
) -> None:
    if not db.is_postgresql:
        pytest.skip("an SQLite file cannot go away behind a proxy (see the locked-file test)")
    proxy = Proxy.for_url(PG_URL)
    pool_db = Target("postgresql", proxy.url(target.url), target.schema).open()
    pool = _pool(pool_db, "cut-off")
    with captured() as log:
        pool.start()
        try:
            wait_for(lambda: _registered(db, "cut-off"), 30, "the pool registered")
            # Due in the middle of the outage: only the Stager makes it available, and only
            # once the database is back.
            due = enqueue(db, JobBuilder("noop", {}).schedule_in(timedelta(seconds=2)))
            start = log.mark()
            down_wall = time.time()
            proxy.down()
            time.sleep(OUTAGE_SECONDS)
            back_at = utcnow()
            up_wall = time.time()
            proxy.up()
            wait_for(
                lambda: get_job(db, due.id).state is JobState.COMPLETED,  # type: ignore[union-attr]
                60,
                "the scheduled job staged and run after the outage",
            )
            clients = ("kickside.pool", "kickside.plugins", "kickside.listen")
            wait_for(
                lambda: all(_lines(log.since(start), c, BACK) for c in clients),
                30,
                "every client saying the database is back",
            )
            time.sleep(2)  # long enough for a relapse to show, were there one
            records = log.since(start)
        finally:
            proxy.up()
            pool.stop(30)
            proxy.close()
            pool_db.dispose()

    started = _started_at(db, due.id)
    assert started is not None and started >= back_at
    shown = [f"{r.name} {r.getMessage()}" for r in records]
    for client in clients:
        (unavailable,) = _records(records, client, UNAVAILABLE)
        (back,) = _records(records, client, BACK)
        # Each client times the outage it saw: from its first failed try, which comes when it
        # next reaches for the database after the cut (late, under load), to its first success.
        assert down_wall <= unavailable.created <= up_wall, shown
        assert back.created >= up_wall, shown
        seen = back.created - unavailable.created
        figure = float(back.getMessage().removeprefix(BACK).rstrip("s"))
        assert abs(figure - seen) <= 0.15, (figure, seen, shown)
    # The six lines, the scheduled job's start and stop, and room for a warning or two.
    assert len(records) <= 10, shown
    assert all(r.exc_info is None and "Traceback" not in r.getMessage() for r in records), shown
    assert {r.levelno for r in records} <= {logging.INFO, logging.WARNING}, shown


def test_a_locked_sqlite_file_is_two_lines_per_client_not_a_traceback_per_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holding the write lock past the busy timeout looks like an outage."""
    monkeypatch.setattr(engines, "SQLITE_BUSY_TIMEOUT_MS", 200)
    path = tmp_path / "kickside.sqlite3"
    db = connect_database(f"sqlite:///{path}")
    migrate.upgrade(db)
    pool = _pool(db, "locked-out")
    holder = sqlite3.connect(path, isolation_level=None)
    with captured() as log:
        pool.start()
        try:
            wait_for(lambda: _registered(db, "locked-out"), 30, "the pool registered")
            due = enqueue(db, JobBuilder("noop", {}).schedule_in(timedelta(seconds=1)))
            start = log.mark()
            holder.execute("BEGIN IMMEDIATE")
            time.sleep(4)
            released_at = utcnow()
            holder.execute("ROLLBACK")
            wait_for(
                lambda: get_job(db, due.id).state is JobState.COMPLETED,  # type: ignore[union-attr]
                60,
                "the scheduled job staged and run after the lock",
            )
            clients = ("kickside.pool", "kickside.plugins")
            wait_for(
                lambda: all(_lines(log.since(start), c, BACK) for c in clients),
                30,
                "both clients saying the database is back",
            )
            records = log.since(start)
        finally:
            holder.close()
            pool.stop(30)
            db.dispose()

    started = _started_at(db, due.id)
    assert started is not None and started >= released_at
    shown = [f"{r.name} {r.getMessage()}" for r in records]
    for client in clients:
        (unavailable,) = _lines(records, client, UNAVAILABLE)
        assert unavailable.endswith("database is locked"), unavailable
        assert len(_lines(records, client, BACK)) == 1, shown
    assert len(records) <= 8, shown
    assert all(r.exc_info is None for r in records), shown
