"""The engine refuses a schema it does not know, checked once per database handle."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    Database,
    JobBuilder,
    JobState,
    MigrationError,
    enqueue,
    get_job,
    migrate,
)
from kickside_engine.runtime import PoolConfig, WorkerPool

from ..conftest import Target
from ..support.workers import registry


def _version_table(db: Database) -> str:
    return f'"{db.schema}".{migrate.VERSION_TABLE}' if db.schema else migrate.VERSION_TABLE


def _jobs(db: Database) -> int:
    with db.read(check_schema=False) as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar_one()
    return int(count)


def _pool(db: Database) -> WorkerPool:
    config = PoolConfig(
        queues={"default": 2},
        registry=registry,
        mode="thread",
        poll_interval=0.05,
        shutdown_grace=timedelta(seconds=2),
    )
    return WorkerPool(db, config)


def _migrated_by_a_newer_kickside(db: Database) -> None:
    with db.begin() as conn:
        conn.execute(sa.text(f"UPDATE {_version_table(db)} SET version_num = 'zz99_newer'"))


def test_enqueue_on_a_newer_schema_is_refused_and_writes_nothing(
    db: Database, target: Target
) -> None:
    _migrated_by_a_newer_kickside(db)
    handle = target.open()
    try:
        with pytest.raises(MigrationError, match=r"'zz99_newer'.*upgrade Kickside"):
            enqueue(handle, JobBuilder("ok", {}))
        assert _jobs(handle) == 0
    finally:
        handle.dispose()


def test_an_embedded_pool_on_a_newer_schema_refuses_to_start(db: Database, target: Target) -> None:
    waiting = enqueue(db, JobBuilder("ok", {}))  # a job the pool must not run
    _migrated_by_a_newer_kickside(db)
    handle = target.open()
    try:
        with pytest.raises(MigrationError, match="zz99_newer"):
            _pool(handle).start()
        with pytest.raises(MigrationError, match="zz99_newer"):
            _pool(handle).run()
    finally:
        handle.dispose()
    job = get_job(db, waiting.id)  # db's own check passed before the change
    assert job is not None and job.state is JobState.AVAILABLE and job.attempt == 0


def test_an_old_schema_is_refused_with_the_fix(target: Target, empty_db: Database) -> None:
    migrate.upgrade(empty_db, "0003")
    with pytest.raises(MigrationError, match=r"not current.*kickside migrate"):
        enqueue(empty_db, JobBuilder("ok", {}))
    migrate.upgrade(empty_db)  # the same handle works once the schema is current
    assert enqueue(empty_db, JobBuilder("ok", {})).state is JobState.AVAILABLE


def test_the_schema_is_checked_once_per_handle(db: Database, target: Target) -> None:
    handle = target.open()
    reads: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "version_num" in statement:
            reads.append(statement)  # the revision read

    sa.event.listen(handle.engine, "before_cursor_execute", before)
    try:
        for n in range(5):
            enqueue(handle, JobBuilder("ok", {"n": n}))
        assert _jobs(handle) == 5
    finally:
        sa.event.remove(handle.engine, "before_cursor_execute", before)
        handle.dispose()
    assert len(reads) == 1


def test_a_fresh_database_migrates_then_works_on_the_same_handle(empty_db: Database) -> None:
    with pytest.raises(MigrationError, match="no Kickside tables"):
        enqueue(empty_db, JobBuilder("ok", {}))
    assert migrate.upgrade(empty_db).up_to_date
    assert enqueue(empty_db, JobBuilder("ok", {})).state is JobState.AVAILABLE
