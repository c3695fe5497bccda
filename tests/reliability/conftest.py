"""Fixtures of the fault suites: a migrated PostgreSQL schema for the PostgreSQL-only faults."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from kickside_engine import Database, migrate

from ..conftest import PG_URL, Target, require_postgres


@pytest.fixture
def pg_target() -> Iterator[Target]:
    """A fresh schema on the test PostgreSQL server, migrated, dropped afterwards."""
    require_postgres()
    target = Target("postgresql", PG_URL, f"kst_{uuid.uuid4().hex[:16]}")
    db = target.open()
    try:
        migrate.upgrade(db)
    finally:
        db.dispose()
    try:
        yield target
    finally:
        engine = sa.create_engine(PG_URL)
        try:
            with engine.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{target.schema}" CASCADE'))
        finally:
            engine.dispose()


@pytest.fixture
def pg_db(pg_target: Target) -> Iterator[Database]:
    """A handle on :func:`pg_target`'s schema."""
    db = pg_target.open()
    try:
        yield db
    finally:
        db.dispose()
