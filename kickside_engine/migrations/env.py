"""Alembic environment for Kickside's tables, however Alembic is started.

- From :mod:`kickside_engine.migrate` (``kickside migrate``, ``migrate.upgrade(db)``): it hands
  over, in ``config.attributes``, the connection of the transaction it opened (the migration
  lock held) and the schema.
- From the ``alembic`` command with the repository's ``alembic.ini`` (``alembic upgrade head``,
  ``alembic check``, ``alembic revision --autogenerate``): the database is the one Kickside is
  configured for (``KICKSIDE_DATABASE_URL`` and ``KICKSIDE_SCHEMA``, else the embedded SQLite
  file), migrated in the same kind of transaction. ``--sql`` prints the SQL instead.

Either way the version table is Kickside's own (``kickside_alembic_version``), every migration
records in the same transaction the oldest code head its new schema runs (expand/contract,
:func:`~kickside_engine.store.revisions.record_compatibility`), and autogenerate
compares the database with the store's metadata, looking at Kickside's tables only: a host
application's tables in the same database are never proposed for removal.
"""

from __future__ import annotations

from logging.config import fileConfig
from typing import Any

from alembic import context
from sqlalchemy import Connection, MetaData

from kickside_engine.store.final_watch import add_awaited_column
from kickside_engine.store.revisions import VERSION_TABLE, record_compatibility
from kickside_engine.store.tables import build_tables

config = context.config


def _target_metadata(source: MetaData) -> MetaData:
    """The store's tables for autogenerate to compare, without the store's naming convention.

    Alembic names what ``op`` directives create with the target metadata's naming convention.
    The revisions spell every name out as the database has it (under the store's convention
    ``ck_kickside_job_slot_identity`` would become ``ck_kickside_job_ck_kickside_job_slot_...``),
    so they run with SQLAlchemy's default one, as they always have. The copied tables keep the
    names the store's convention gave them.
    """
    metadata = MetaData(schema=source.schema)
    for table in source.sorted_tables:
        table.to_metadata(metadata)
    add_awaited_column(metadata, source.schema)  # declared by waiters alone (store/final_watch)
    return metadata


def _options(schema: str | None, dialect: str) -> dict[str, Any]:
    """What both ways in configure alike: the version table, the metadata and its filters."""
    source = build_tables(schema).metadata
    tables = set(source.tables.values())
    names = {table.name for table in tables}
    # Indexes created on another dialect only (``ddl_if``: the GIN index on tags, PostgreSQL's)
    # are in the metadata everywhere; autogenerate would propose them here.
    elsewhere = {
        index.name
        for table in tables
        for index in table.indexes
        if (only := index._ddl_if) is not None and only.dialect not in (None, dialect)
    }

    def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
        if type_ == "schema":
            return name == schema
        return type_ != "table" or name in names

    def include_object(obj: Any, name: str | None, type_: str, reflected: bool, other: Any) -> bool:
        return not (type_ == "index" and name in elsewhere)

    return {
        "target_metadata": _target_metadata(source),
        "version_table": VERSION_TABLE,
        "version_table_schema": schema,
        "include_schemas": schema is not None,
        "include_name": include_name,
        "include_object": include_object,
        "transactional_ddl": True,
    }


def _migrate(connection: Connection, schema: str | None) -> None:
    context.configure(connection=connection, **_options(schema, connection.dialect.name))
    with context.begin_transaction():
        context.run_migrations()
        record_compatibility(connection, schema)


def _migrate_from_the_alembic_command() -> None:
    from kickside_engine.config import resolve_database_config
    from kickside_engine.migrate import migration_transaction
    from kickside_engine.store.database import connect_database

    if config.config_file_name is not None:  # the ini's logging: Alembic reports each step
        fileConfig(config.config_file_name, disable_existing_loggers=False)
    where = resolve_database_config()
    config.attributes["schema"] = where.schema  # the revisions read it, as from migrate
    if context.is_offline_mode():
        context.configure(
            url=where.url, literal_binds=True, **_options(where.schema, where.dialect)
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    db = connect_database(where.url, schema=where.schema)
    try:
        with migration_transaction(db) as conn:
            _migrate(conn, db.schema)
    finally:
        db.dispose()


_connection = config.attributes.get("connection")
if _connection is None:
    _migrate_from_the_alembic_command()
else:
    _migrate(_connection, config.attributes.get("schema"))
