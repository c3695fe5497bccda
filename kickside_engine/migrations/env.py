"""Alembic environment: Kickside always migrates through a connection handed to it.

See :mod:`kickside_engine.migrate`, which opens the transaction, takes the migration lock and
passes the connection and schema in ``config.attributes``.
"""

from __future__ import annotations

from alembic import context

config = context.config
connection = config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "run Kickside migrations through kickside_engine.migrate or `kickside migrate`"
    )

context.configure(
    connection=connection,
    target_metadata=None,
    version_table="kickside_alembic_version",
    version_table_schema=config.attributes.get("schema"),
    transactional_ddl=True,
)

with context.begin_transaction():
    context.run_migrations()
