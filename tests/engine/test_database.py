"""Database URLs resolve along one path; SQLite is tuned; hosts can hand over their engine."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import (
    ConfigurationError,
    Database,
    DatabaseUnavailableError,
    connect_database,
    migrate,
    resolve_database_config,
)
from kickside_engine.config import default_sqlite_path

from ..conftest import PG_URL, Target, require_postgres


def test_default_is_the_embedded_sqlite_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("KICKSIDE_DATABASE_URL", raising=False)
    monkeypatch.setenv("KICKSIDE_HOME", str(tmp_path))
    config = resolve_database_config()
    assert config.dialect == "sqlite"
    assert config.url.database == str(tmp_path / "kickside.sqlite3")
    assert default_sqlite_path() == tmp_path / "kickside.sqlite3"


def test_xdg_data_home_is_honoured(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KICKSIDE_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_sqlite_path() == tmp_path / "kickside" / "kickside.sqlite3"


def test_argument_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KICKSIDE_DATABASE_URL", "sqlite:////tmp/from-env.sqlite3")
    assert resolve_database_config().url.database == "/tmp/from-env.sqlite3"
    assert resolve_database_config("sqlite:////tmp/arg.sqlite3").url.database == "/tmp/arg.sqlite3"


@pytest.mark.parametrize(
    "url", ["postgresql://u@h/db", "postgres://u@h/db", "postgresql+psycopg2://u@h/db"]
)
def test_postgresql_urls_use_psycopg_3(url: str) -> None:
    assert resolve_database_config(url).url.drivername == "postgresql+psycopg"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "invalid database URL"),
        ("mysql://root:hunter2@localhost/db", "unsupported database 'mysql'"),
        ("sqlite://", "in-memory"),
        ("postgresql+asyncpg://u:hunter2@h/db", "unsupported PostgreSQL driver"),
        ("postgresql://u:hunter2@h", "names no database"),
    ],
)
def test_bad_urls_get_one_line_errors_without_the_password(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        resolve_database_config(url)
    assert "hunter2" not in str(info.value)
    assert "\n" not in str(info.value)


def test_schema_is_validated_and_postgresql_only() -> None:
    with pytest.raises(ConfigurationError, match="only supported on PostgreSQL"):
        resolve_database_config("sqlite:////tmp/x.sqlite3", schema="jobs")
    with pytest.raises(ConfigurationError, match="invalid schema name"):
        resolve_database_config("postgresql://u@h/db", schema='x"; drop table y; --')
    assert resolve_database_config("postgresql://u@h/db", schema="jobs").schema == "jobs"


def test_display_url_masks_the_password() -> None:
    db = connect_database("postgresql://deploy:not-a-password@127.0.0.1:1/db")
    assert "not-a-password" not in db.display_url()
    assert "not-a-password" not in repr(db)


def test_unreachable_server_is_database_unavailable() -> None:
    db = connect_database("postgresql://deploy:not-a-password@127.0.0.1:1/db")
    with pytest.raises(DatabaseUnavailableError) as info:
        migrate.status(db)
    assert "not-a-password" not in str(info.value)
    assert "127.0.0.1" in str(info.value)


def test_sqlite_runs_in_wal_mode_with_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    db = connect_database(f"sqlite:///{tmp_path}/nested/dir/k.sqlite3")
    with db.read() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 5000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    db.dispose()


def test_a_host_engine_is_used_as_is(target: Target) -> None:
    host_engine = sa.create_engine(target.url)
    db = Database(host_engine, schema=target.schema)
    migrate.upgrade(db)
    assert migrate.status(db).up_to_date
    db.dispose()  # not ours: the host's engine stays usable
    with host_engine.connect() as conn:
        assert conn.execute(sa.text("SELECT 1")).scalar() == 1
    host_engine.dispose()


def test_a_database_with_nothing_else_in_it_can_be_initialised() -> None:
    """The engine owns its trigger function: a brand-new PostgreSQL database migrates."""
    require_postgres()
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    name = "kickside_fresh_db_test"
    with admin.connect() as conn:
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name}"))
        conn.execute(sa.text(f"CREATE DATABASE {name} TEMPLATE template0"))
    try:
        url = sa.make_url(PG_URL).set(database=name)
        db = connect_database(url)
        assert migrate.upgrade(db).up_to_date
        assert migrate.downgrade(db, "base").current is None
        assert migrate.upgrade(db).up_to_date
        db.dispose()
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()
