"""The exceptions Kickside raises.

Every error the engine raises on purpose is a :class:`KicksideError`. Each subclass carries an
``exit_code`` that the CLI turns into its process exit status, so the mapping from failure kind
to exit code lives in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KicksideError(Exception):
    """Something Kickside could not do.

    ``details`` carries machine-readable facts about the error (for scripts: the CLI prints
    them in its ``--json`` error document), for example the names that do exist when a name
    was not found.
    """

    exit_code = 1
    #: The error's kind in the CLI's ``--json`` error document (``"not_found"``, ...).
    code = "failure"

    def __init__(self, message: str = "", details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details: dict[str, Any] = dict(details or {})


class InvalidArgumentError(KicksideError, ValueError):
    """An argument was rejected before anything was written."""

    exit_code = 2
    code = "invalid_argument"


class ConfigurationError(KicksideError):
    """The configuration (database URL, schema name, settings) is not usable."""

    exit_code = 2
    code = "configuration"


class NotFoundError(KicksideError, LookupError):
    """The job, slot, queue or revision asked for does not exist."""

    exit_code = 3
    code = "not_found"


class ConflictError(KicksideError):
    """The action conflicts with the current state; it may be retried or continued.

    ``details`` carries machine-readable facts about the conflict, for example
    ``{"cleanup_pending": True, "needs_continue": True}`` from a slot purge.
    """

    exit_code = 4
    code = "conflict"


class DatabaseUnavailableError(KicksideError):
    """The database could not be reached, the connection was lost, or another writer kept a
    SQLite file locked past the busy timeout: nothing to fix but the wait (retry)."""

    exit_code = 5
    code = "database_unavailable"


class AuthenticationError(KicksideError):
    """The database refused the credentials: a wrong user or password, or no entry for them.

    Not an outage (exit 1, not 5): retrying cannot help until the URL or the server's
    authentication rules change.
    """

    exit_code = 1
    code = "authentication_failed"


class PermissionDeniedError(KicksideError):
    """The database refused the change: the role (or the SQLite file) may only read."""

    exit_code = 1
    code = "permission_denied"


class ReadOnlyError(KicksideError):
    """A change refused because this process was started read-only; nothing was written.

    Raised before the database is touched: by the dashboard's adapter when ``kickside-tui`` runs
    with ``--read-only`` (or ``KICKSIDE_READ_ONLY``) and an action is asked for, and by
    ``kickside --read-only`` for a command that changes the database. Unlike
    :class:`PermissionDeniedError`, the database was never asked (exit 2, a usage error).
    """

    exit_code = 2
    code = "read_only"


class MigrationError(KicksideError):
    """The database schema is at a revision this version of Kickside cannot work with."""

    exit_code = 1
    code = "schema_revision"


class ArgsDecodeError(InvalidArgumentError):
    """A job's stored args do not decode into its worker's ``args_type``.

    The message names each bad field by its path (``$.lines[0].qty: required field missing``).
    A job whose args do not decode is discarded with it: retrying cannot fix the args.
    """


class PoolFailedError(KicksideError, RuntimeError):
    """A pool run on a thread stopped on an error (its ``WorkerPool.error``, the cause).

    Raised by ``WorkerPool.start`` when the pool stops before it is ready and by
    ``WorkerPool.stop`` when it had already stopped: an embedding application learns its pool
    is gone. Still a ``RuntimeError``, as it was before it joined the Kickside errors.
    """


class WaitTimeoutError(KicksideError, TimeoutError):
    """The job did not reach a final state before the wait's timeout.

    It is not a failure of the job, which may still finish: wait again, or look later. Exit code
    4, as for other conditions that a retry may clear. ``details`` holds the job id and the state
    it was last seen in.
    """

    exit_code = 4
    code = "wait_timeout"
