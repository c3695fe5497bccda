"""Kickside: a durable, database-backed, leased-job engine."""

from kickside_engine.config import DatabaseConfig, resolve_database_config
from kickside_engine.errors import (
    ConfigurationError,
    ConflictError,
    DatabaseUnavailableError,
    InvalidArgumentError,
    KicksideError,
    MigrationError,
    NotFoundError,
)
from kickside_engine.store.database import Database, connect_database

__all__ = [
    "ConfigurationError",
    "ConflictError",
    "Database",
    "DatabaseConfig",
    "DatabaseUnavailableError",
    "InvalidArgumentError",
    "KicksideError",
    "MigrationError",
    "NotFoundError",
    "connect_database",
    "resolve_database_config",
]
