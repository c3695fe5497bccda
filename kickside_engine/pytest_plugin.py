"""Kickside's pytest plugin: the ``kickside_db`` and ``kickside_async_db`` fixtures.

Registered under the ``pytest11`` entry point, so pytest loads it in any project that has
Kickside installed. It imports the engine only when a test asks for the fixture, which keeps
pytest's start-up as fast as it was for projects that never use it. The helpers themselves
(``drain_jobs``, ``assert_enqueued``, ...) are in :mod:`kickside_engine.testing`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kickside_engine.store.async_database import AsyncDatabase
    from kickside_engine.store.database import Database


@pytest.fixture
def kickside_db(tmp_path: Path) -> Iterator[Database]:
    """A migrated Kickside database (SQLite) in the test's temporary directory."""
    from kickside_engine.migrate import upgrade
    from kickside_engine.store.database import connect_database

    db = connect_database(f"sqlite:///{tmp_path / 'kickside-test.sqlite3'}")
    upgrade(db)
    try:
        yield db
    finally:
        db.dispose()


@pytest.fixture
def kickside_async_db(kickside_db: Database) -> AsyncDatabase:
    """An :class:`~kickside_engine.store.async_database.AsyncDatabase` on ``kickside_db``'s
    database, for async tests (pytest-asyncio, anyio, any runner).

    A plain fixture, not an async one, so it needs no async plugin: it opens a connection per
    transaction and keeps none, so nothing it holds outlives the test's event loop.
    """
    from kickside_engine.store.async_database import connect_async_database

    return connect_async_database(kickside_db.engine.url, pooled=False)
