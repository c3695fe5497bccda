"""Database URLs resolve along one path; SQLite is tuned; hosts can hand over their engine."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    AuthenticationError,
    ConfigurationError,
    Database,
    DatabaseUnavailableError,
    JobBuilder,
    PermissionDeniedError,
    connect_database,
    enqueue,
    migrate,
    resolve_database_config,
)
from kickside_engine.config import default_sqlite_path
from kickside_engine.store import engines
from kickside_engine.store.driver_errors import translate_errors, unavailable_reason

from ..conftest import PG_URL, Target, require_postgres
from ..support.processes import hold_write_lock, release_write_lock


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


def test_a_role_the_server_does_not_know_is_an_authentication_failure_not_an_outage() -> None:
    require_postgres()
    url = sa.make_url(PG_URL).set(
        username=f"kst_nobody_{uuid.uuid4().hex[:8]}", password="not-a-password"
    )
    db = connect_database(url.render_as_string(hide_password=False))
    with pytest.raises(AuthenticationError, match="authentication failed") as info:
        migrate.status(db)
    assert info.value.exit_code == 1 and info.value.code == "authentication_failed"
    assert "does not exist" in str(info.value) and "not-a-password" not in str(info.value)
    assert unavailable_reason(info.value) is None  # scripts and pools do not retry it


@pytest.mark.parametrize(
    "message",
    [
        'FATAL:  password authentication failed for user "app"',  # 28P01
        'FATAL:  role "app" is not permitted to log in',  # 28000
        'FATAL:  no pg_hba.conf entry for host "10.0.0.7", user "app", database "app"',
        "fe_sendauth: no password supplied",
    ],
)
def test_refused_credentials_are_an_authentication_failure(message: str) -> None:
    import psycopg

    refused = psycopg.OperationalError(f"connection failed: {message}")
    with pytest.raises(AuthenticationError), translate_errors():
        raise sa.exc.OperationalError(None, None, refused)
    assert unavailable_reason(sa.exc.OperationalError(None, None, refused)) is None
    assert unavailable_reason(refused) is None


def test_a_lost_connection_stays_an_outage() -> None:
    import psycopg

    for message in (
        'connection to server at "db" failed: Connection refused',
        "server closed the connection unexpectedly",
    ):
        lost = psycopg.OperationalError(message)
        with pytest.raises(DatabaseUnavailableError), translate_errors():
            raise sa.exc.OperationalError(None, None, lost)
        assert unavailable_reason(lost) is not None


def test_sqlite_runs_in_wal_mode_with_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    db = connect_database(f"sqlite:///{tmp_path}/nested/dir/k.sqlite3")
    with db.read(check_schema=False) as conn:  # the connection's settings, on any schema
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


@pytest.fixture(params=["transactional", "autocommit"])
def one_connection_db(request: pytest.FixtureRequest, target: Target) -> Iterator[Database]:
    """The target database behind a pool of one connection (so every checkout is the same
    one), with a ``scratch`` table beside Kickside's (migrated, so the handle's schema check has
    passed); a host engine that runs in transactions or in autocommit itself."""
    autocommit = request.param == "autocommit"
    if target.backend == "postgresql":
        engine = sa.create_engine(
            target.url,
            pool_size=1,
            max_overflow=0,
            isolation_level="AUTOCOMMIT" if autocommit else "READ COMMITTED",
        )
        scratch = f'"{target.schema}".scratch'
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{target.schema}"')
            conn.exec_driver_sql(f"CREATE TABLE {scratch} (v integer PRIMARY KEY)")
    else:  # sqlite3's own transactions (opened before a write), or none
        engine = sa.create_engine(
            target.url,
            pool_size=1,
            max_overflow=0,
            **({"isolation_level": "AUTOCOMMIT"} if autocommit else {}),
        )
        with engine.begin() as conn:
            # Not the rowid: NULL is refused, not numbered; and SQLite stores any type unless
            # told not to.
            conn.exec_driver_sql(
                "CREATE TABLE scratch (v integer NOT NULL UNIQUE CHECK (typeof(v) = 'integer'))"
            )
    db = Database(engine, schema=target.schema)
    migrate.upgrade(db)
    migrate.ensure_current(db)
    assert _driver_autocommit(db) is autocommit
    yield db
    engine.dispose()


def _scratch_table(db: Database) -> str:
    return f'"{db.schema}".scratch' if db.schema else "scratch"


def _insert_sql(db: Database) -> str:
    value = "%(v)s" if db.is_postgresql else ":v"  # the driver's named style
    return f"INSERT INTO {_scratch_table(db)} (v) VALUES ({value})"


def _insert(db: Database, value: object) -> None:
    db.execute_autocommit(_insert_sql(db), {"v": value})


def _scratch(db: Database) -> list[int]:
    with db.read() as conn:
        return sorted(conn.exec_driver_sql(f"SELECT v FROM {_scratch_table(db)}").scalars())


def _driver_autocommit(db: Database) -> bool:
    """The pooled connection's mode as the pool hands it out."""
    raw = db.engine.raw_connection()
    try:
        driver: Any = raw.driver_connection
        if db.is_postgresql:
            return bool(driver.autocommit)
        return driver.isolation_level is None
    finally:
        raw.close()


def test_execute_autocommit_commits_and_returns_the_connection_as_it_came(
    one_connection_db: Database,
) -> None:
    db = one_connection_db
    came_in_autocommit = _driver_autocommit(db)
    _insert(db, 1)
    assert _scratch(db) == [1]  # committed: another transaction sees it
    assert _driver_autocommit(db) is came_in_autocommit
    if not came_in_autocommit:
        with pytest.raises(RuntimeError), db.begin() as conn:
            conn.exec_driver_sql(f"INSERT INTO {_scratch_table(db)} (v) VALUES (2)")
            raise RuntimeError("roll back")
        assert _scratch(db) == [1]  # the next transaction is a real one


def test_execute_autocommit_raises_what_autocommit_raises(one_connection_db: Database) -> None:
    db = one_connection_db
    came_in_autocommit = _driver_autocommit(db)
    _insert(db, 1)
    statement = _insert_sql(db)
    # A duplicate, a text, a number out of range (PostgreSQL's integer), a NULL.
    refused: tuple[object, ...] = (1, "not a number", None)
    if db.is_postgresql:
        refused += (2**40,)
    for value in refused:
        with pytest.raises(sa.exc.DBAPIError) as fast:
            db.execute_autocommit(statement, {"v": value})
        with pytest.raises(sa.exc.DBAPIError) as slow, db.autocommit() as conn:
            conn.exec_driver_sql(statement, {"v": value})
        assert type(fast.value) is type(slow.value), value
        assert type(fast.value.orig) is type(slow.value.orig), value
        assert not fast.value.connection_invalidated
        assert _driver_autocommit(db) is came_in_autocommit
    _insert(db, 2)
    assert _scratch(db) == [1, 2]


def test_execute_autocommit_translates_a_refused_write(
    one_connection_db: Database, target: Target
) -> None:
    db = one_connection_db
    if target.backend == "sqlite":
        with db.engine.connect() as conn:  # the pool's only connection, from now on read-only
            conn.exec_driver_sql("PRAGMA query_only = ON")
        with pytest.raises(PermissionDeniedError, match="permission denied"):
            _insert(db, 1)
        with db.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA query_only = OFF")
        assert _scratch(db) == []
        return
    role = f"kst_nobody_{uuid.uuid4().hex[:10]}"
    with db.engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE ROLE "{role}" NOLOGIN')
    try:
        with db.engine.connect() as conn:  # the pool's only connection, from now on as ``role``
            conn.exec_driver_sql(f'SET SESSION AUTHORIZATION "{role}"')
            conn.commit()
        with pytest.raises(PermissionDeniedError, match="permission denied"):
            _insert(db, 1)
        with db.engine.connect() as conn:
            conn.exec_driver_sql("RESET SESSION AUTHORIZATION")
            conn.commit()
        assert _scratch(db) == []
    finally:
        with db.engine.begin() as conn:
            conn.exec_driver_sql(f'DROP ROLE "{role}"')


def test_execute_autocommit_discards_a_dead_connection(one_connection_db: Database) -> None:
    db = one_connection_db
    if not db.is_postgresql:
        pytest.skip("a SQLite connection has no server end to lose")
    _insert(db, 1)
    with db.engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    admin = sa.create_engine(PG_URL)
    with admin.connect() as conn:  # and wait (up to 5 s) until it is gone
        assert conn.execute(sa.text("SELECT pg_terminate_backend(:p, 5000)"), {"p": pid}).scalar()
    admin.dispose()
    with pytest.raises(DatabaseUnavailableError):
        _insert(db, 2)
    _insert(db, 3)  # on a new connection
    assert _scratch(db) == [1, 3]


def test_execute_autocommit_waits_for_sqlites_write_lock(tmp_path: Path) -> None:
    """One statement outside a transaction waits for another writer, as BEGIN IMMEDIATE does,
    instead of failing with "database is locked"."""
    url = f"sqlite:///{tmp_path}/k.sqlite3"
    db = connect_database(url)
    migrate.upgrade(db)
    with db.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE scratch (v integer)")
    holder = sa.create_engine(url)
    with holder.connect() as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        released = threading.Timer(0.5, conn.exec_driver_sql, ("COMMIT",))
        released.start()
        started = time.monotonic()
        _insert(db, 1)
        waited = time.monotonic() - started
        released.join()
    holder.dispose()
    assert _scratch(db) == [1]
    assert waited >= 0.4  # it waited for the lock rather than writing beside it
    db.dispose()


def test_execute_autocommit_refuses_an_async_engine(tmp_path: Path) -> None:
    pytest.importorskip("aiosqlite")
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/k.sqlite3")
    db = Database(engine.sync_engine)
    with pytest.raises(ConfigurationError, match="synchronous engine"):
        db.execute_autocommit("SELECT 1", {})
    engine.sync_engine.dispose()


def test_a_sqlite_file_locked_past_the_busy_timeout_is_database_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holding the write lock longer than the busy timeout: the write fails
    as an outage (exit code 5, retry), saying why in one line; once free, it succeeds."""
    monkeypatch.setattr(engines, "SQLITE_BUSY_TIMEOUT_MS", 300)
    path = tmp_path / "k.sqlite3"
    db = connect_database(f"sqlite:///{path}")
    migrate.upgrade(db)
    holder = hold_write_lock(path)
    try:
        with pytest.raises(DatabaseUnavailableError) as caught:
            enqueue(db, JobBuilder("noop", {}))
    finally:
        release_write_lock(holder)
    message = str(caught.value)
    assert "\n" not in message
    assert message == (
        f"sqlite:///{path} stayed locked by another writer past the busy timeout (0.3 s): "
        "database is locked"
    )
    assert caught.value.exit_code == 5
    enqueue(db, JobBuilder("noop", {}))  # the lock is free: the same call succeeds
    db.dispose()


def _noop_count(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar_one())


def test_single_enqueues_of_an_owned_handle_survive_errors_racing_threads_and_dispose(
    target: Target,
) -> None:
    """A handle Kickside opened keeps one connection for single enqueues on SQLite: threads
    that find it busy use the pool, a refused statement gives it back, and ``dispose`` returns
    it (a handle disposed is usable again)."""
    db = target.open()
    migrate.upgrade(db)
    JobBuilder("noop", {}).insert(db)
    with pytest.raises(sa.exc.DBAPIError):
        db.execute_autocommit("INSERT INTO kickside_no_such_table VALUES (1)", {})
    failures: list[BaseException] = []

    def enqueue_many() -> None:
        try:
            for _ in range(100):
                JobBuilder("noop", {}).insert(db)
        except BaseException as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=enqueue_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert _noop_count(db) == 801
    disposing = threading.Thread(target=db.dispose)
    disposing.start()
    disposing.join(10)
    assert not disposing.is_alive(), "dispose waited for a connection nobody gave back"
    JobBuilder("noop", {}).insert(db)
    assert _noop_count(db) == 802
    db.dispose()


def _enqueue_in_child(db: Database, jobs: int) -> None:
    db.engine.dispose(close=False)  # SQLAlchemy's rule for a pool crossing a fork
    _enqueue(db, jobs)


def _enqueue(db: Database, jobs: int) -> None:
    for _ in range(jobs):
        JobBuilder("noop", {}).insert(db)


def test_a_forked_child_enqueues_beside_its_parent_on_the_same_handle(target: Target) -> None:
    """A process forked after its parent enqueued through a handle enqueues through that
    handle too, on a connection of its own, and the parent goes on after it."""
    import multiprocessing

    db = target.open()
    migrate.upgrade(db)
    JobBuilder("noop", {}).insert(db)
    child = multiprocessing.get_context("fork").Process(target=_enqueue_in_child, args=(db, 50))
    child.start()
    _enqueue(db, 50)
    child.join(60)
    assert child.exitcode == 0
    _enqueue(db, 10)
    assert _noop_count(db) == 111
    db.dispose()
