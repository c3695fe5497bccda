"""The exceptions Kickside raises.

Every error the engine raises on purpose is a :class:`KicksideError`. Each subclass carries an
``exit_code`` that the CLI turns into its process exit status, so the mapping from failure kind
to exit code lives in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KicksideError(Exception):
    """Something Kickside could not do."""

    exit_code = 1


class InvalidArgumentError(KicksideError, ValueError):
    """An argument was rejected before anything was written."""

    exit_code = 2


class ConfigurationError(KicksideError):
    """The configuration (database URL, schema name, settings) is not usable."""

    exit_code = 2


class NotFoundError(KicksideError, LookupError):
    """The job, slot, queue or revision asked for does not exist."""

    exit_code = 3


class ConflictError(KicksideError):
    """The action conflicts with the current state; it may be retried or continued.

    ``details`` carries machine-readable facts about the conflict, for example
    ``{"cleanup_pending": True, "needs_continue": True}`` from a slot purge.
    """

    exit_code = 4

    def __init__(self, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details: dict[str, Any] = dict(details or {})


class DatabaseUnavailableError(KicksideError):
    """The database could not be reached, or refused the connection."""

    exit_code = 5


class PermissionDeniedError(KicksideError):
    """The database refused the change: the role (or the SQLite file) may only read."""

    exit_code = 1


class MigrationError(KicksideError):
    """The database schema is at a revision this version of Kickside cannot work with."""

    exit_code = 1
