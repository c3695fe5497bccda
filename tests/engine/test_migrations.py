"""Migrations create exactly the engine's schema, round-trip, and refuse unknown revisions."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from kickside_engine import Database, JobBuilder, MigrationError, NotFoundError, migrate
from kickside_engine.store.final_watch import add_awaited_column
from kickside_engine.store.tables import build_tables

ENGINE_TABLES = {
    "kickside_job",
    "kickside_job_run",
    "kickside_queue",
    "kickside_node",
    "kickside_setting",
    "kickside_recurring_execution",
    "kickside_audit",
    "kickside_rate_window",
}


def _table_names(db: Database) -> set[str]:
    with db.read(check_schema=False) as conn:  # also between migrations
        return set(sa.inspect(conn).get_table_names(schema=db.schema))


def test_upgrade_creates_every_engine_table(db: Database) -> None:
    assert _table_names(db) >= ENGINE_TABLES
    assert migrate.status(db).up_to_date


def _engine_metadata(schema: str | None) -> sa.MetaData:
    """The store's tables, with the job's ``awaited`` column that only waiters declare
    (``store/final_watch.py``) put back on a copy."""
    metadata = sa.MetaData()
    for table in build_tables(schema).metadata.sorted_tables:
        table.to_metadata(metadata)
    add_awaited_column(metadata, schema)
    return metadata


def test_migrated_schema_matches_the_engine_metadata(db: Database) -> None:
    metadata = _engine_metadata(db.schema)
    with db.read() as conn:
        ctx = MigrationContext.configure(
            conn,
            opts={
                "include_schemas": db.schema is not None,
                "include_name": lambda name, type_, parent: type_ != "schema" or name == db.schema,
                # The GIN index on tags is PostgreSQL-only (ddl_if), which autogenerate ignores.
                "include_object": lambda obj, name, type_, reflected, compare_to: (
                    db.is_postgresql or name != "ix_kickside_job_tags"
                ),
                "version_table": migrate.VERSION_TABLE,
                "version_table_schema": db.schema,
            },
        )
        diff = compare_metadata(ctx, metadata)
    assert diff == []


def test_migrated_check_constraints_have_the_metadata_names(db: Database) -> None:
    # compare_metadata does not compare CHECK constraints; their names matter (operators and
    # tests name them). The revisions spell them out, and must run without the store's naming
    # convention, which would prefix them again (migrations/env.py).
    metadata = build_tables(db.schema).metadata
    with db.read() as conn:
        inspector = sa.inspect(conn)
        for table in metadata.sorted_tables:
            found = {c["name"] for c in inspector.get_check_constraints(table.name, db.schema)}
            wanted = {str(c.name) for c in table.constraints if isinstance(c, sa.CheckConstraint)}
            assert found == wanted, table.name


def test_migrated_indexes_match_the_metadata_predicates_and_methods_included(
    db: Database,
) -> None:
    # compare_metadata matches indexes by name and columns only: a partial index's predicate
    # and a GIN index's method are compared here, with the same tables created from metadata.
    if db.is_postgresql:
        other = f"{db.schema}_md"
        with db.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{other}"'))
            build_tables(other).metadata.create_all(conn)
        try:
            assert _pg_index_definitions(db, other) == _pg_index_definitions(db, db.schema)
        finally:
            with db.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{other}" CASCADE'))
        return
    engine = sa.create_engine("sqlite://")
    try:
        with engine.begin() as conn:
            build_tables(None).metadata.create_all(conn)
            expected = _sqlite_index_definitions(conn)
    finally:
        engine.dispose()
    with db.read() as conn:
        assert _sqlite_index_definitions(conn) == expected


def _pg_index_definitions(db: Database, schema: str | None) -> dict[str, str]:
    with db.read() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT indexname, indexdef FROM pg_indexes"
                " WHERE schemaname = :s AND tablename <> :version"
            ),
            {"s": schema, "version": migrate.VERSION_TABLE},
        ).all()
    return {name: definition.replace(f"{schema}.", "") for name, definition in rows}


def _sqlite_index_definitions(conn: sa.Connection) -> dict[str, str]:
    rows = conn.execute(
        sa.text("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    ).all()
    return {name: " ".join(sql.split()) for name, sql in rows}


def test_upgrading_a_current_database_is_a_no_op(db: Database) -> None:
    with db.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {_q(db, 'marker')} (x INTEGER)"))
    status = migrate.upgrade(db)
    assert status.up_to_date and status.pending == ()
    assert "marker" in _table_names(db)


def test_downgrade_to_base_then_upgrade_round_trips(db: Database) -> None:
    status = migrate.downgrade(db, "base")
    assert status.current is None
    assert _table_names(db) & ENGINE_TABLES == set()
    if db.is_postgresql:
        with db.read(check_schema=False) as conn:
            functions = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                    " WHERE p.proname = 'kickside_set_updated_at' AND n.nspname = :s"
                ),
                {"s": db.schema},
            ).scalar_one()
        assert functions == 0
    assert migrate.upgrade(db).up_to_date
    assert _table_names(db) >= ENGINE_TABLES


def test_unknown_revision_gets_a_clear_error_and_no_change(db: Database) -> None:
    with db.begin() as conn:
        conn.execute(sa.text(f"UPDATE {_q(db, migrate.VERSION_TABLE)} SET version_num = 'zz99'"))
    with pytest.raises(MigrationError, match=r"'zz99'.*does not know"):
        migrate.upgrade(db)
    with pytest.raises(MigrationError, match="zz99"):
        migrate.status(db)
    assert _table_names(db) >= ENGINE_TABLES


def test_downgrade_to_a_revision_that_does_not_exist_is_not_found(db: Database) -> None:
    with pytest.raises(NotFoundError, match="nope"):
        migrate.downgrade(db, "nope")
    assert migrate.status(db).up_to_date


def test_ensure_current_names_the_fix(empty_db: Database) -> None:
    with pytest.raises(MigrationError, match="kickside migrate"):
        migrate.ensure_current(empty_db)


def test_failed_migration_leaves_nothing_half_done(empty_db: Database) -> None:
    # A table in the way makes the first migration fail part-way; the whole upgrade rolls back.
    with empty_db.begin(check_schema=False) as conn:
        if empty_db.schema:
            conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{empty_db.schema}"'))
        conn.execute(sa.text(f"CREATE TABLE {_q(empty_db, 'kickside_queue')} (x INTEGER)"))
    with pytest.raises(sa.exc.DBAPIError):
        migrate.upgrade(empty_db)
    assert _table_names(empty_db) == {"kickside_queue"}
    assert migrate.current_revision(empty_db) is None


def test_updated_at_trigger_fills_a_timestamp_the_application_left_alone(db: Database) -> None:
    if not db.is_postgresql:
        pytest.skip("the updated_at trigger function is PostgreSQL's")
    q = _q(db, "kickside_queue")
    with db.begin() as conn:
        conn.execute(
            sa.text(f"INSERT INTO {q} (name, updated_at) VALUES ('a', '2000-01-01T00:00:00Z')")
        )
        conn.execute(sa.text(f"UPDATE {q} SET paused = true WHERE name = 'a'"))
        year = conn.execute(
            sa.text(f"SELECT extract(year FROM updated_at) FROM {q} WHERE name = 'a'")
        ).scalar_one()
    assert int(year) > 2000


def _trigger_calls(conn: sa.Connection, db: Database) -> int:
    """How often this transaction called the ``updated_at`` trigger function."""
    function = f'"{db.schema}".kickside_set_updated_at' if db.schema else "kickside_set_updated_at"
    calls = conn.execute(
        sa.text("SELECT pg_stat_get_xact_function_calls(CAST(:f AS regproc))"), {"f": function}
    ).scalar_one()
    return int(calls or 0)


@pytest.mark.parametrize("table", ["kickside_job", "kickside_queue"])
def test_updated_at_trigger_is_called_only_for_updates_that_leave_the_timestamp_alone(
    db: Database, table: str
) -> None:
    # Claims and settles set updated_at: calling the function for them did nothing but cost a
    # PL/pgSQL call per row (migration 0013 gives the trigger the function's test as WHEN).
    if not db.is_postgresql:
        pytest.skip("the updated_at trigger function is PostgreSQL's")
    t = _q(db, table)
    if table == "kickside_job":
        key = f"id = '{JobBuilder('w').insert(db).id}'"
    else:
        key = "name = 'a'"
        with db.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {t} (name, updated_at) VALUES ('a', now())"))
    with db.begin() as conn:
        conn.execute(sa.text("SET LOCAL track_functions = 'pl'"))
        conn.execute(sa.text(f"UPDATE {t} SET updated_at = '2001-01-01T00:00:00Z' WHERE {key}"))
        assert _trigger_calls(conn, db) == 0
        year = f"SELECT extract(year FROM updated_at) FROM {t} WHERE {key}"
        assert int(conn.execute(sa.text(year)).scalar_one()) == 2001
        conn.execute(sa.text(f"UPDATE {t} SET updated_at = updated_at WHERE {key}"))  # alone
        assert _trigger_calls(conn, db) == 1
        assert int(conn.execute(sa.text(year)).scalar_one()) > 2001


def test_migration_0013_keeps_what_the_updated_at_triggers_do(db: Database) -> None:
    if not db.is_postgresql:
        pytest.skip("the updated_at triggers are PostgreSQL's")
    migrate.downgrade(db, "0012")
    test_updated_at_trigger_fills_a_timestamp_the_application_left_alone(db)
    with db.begin(check_schema=False) as conn:
        conn.execute(sa.text("SET LOCAL track_functions = 'pl'"))
        conn.execute(sa.text(f"UPDATE {_q(db, 'kickside_queue')} SET updated_at = now()"))
        assert _trigger_calls(conn, db) == 1  # 0012: called for every row
        conn.execute(sa.text(f"DELETE FROM {_q(db, 'kickside_queue')}"))
    assert migrate.upgrade(db).up_to_date
    test_updated_at_trigger_fills_a_timestamp_the_application_left_alone(db)


def _q(db: Database, table: str) -> str:
    return f'"{db.schema}".{table}' if db.schema else table
