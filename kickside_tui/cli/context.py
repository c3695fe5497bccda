"""Shared CLI state: the database options from the root callback, and error handling."""

from __future__ import annotations

import functools
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar

import typer
from rich.markup import escape
from typer.exceptions import TyperException

from kickside_engine import (
    ConflictError,
    Database,
    InvalidArgumentError,
    KicksideError,
    connect_database,
    migrate,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, record_audit
from kickside_engine.queries import parse_job_id
from kickside_engine.redact import redact_text, redact_value
from kickside_tui.adapter import ReadOnlyError
from kickside_tui.cli import output

P = ParamSpec("P")
R = TypeVar("R")

#: Set to 1 (or true) for the same effect as ``--read-only``.
READ_ONLY_ENV = "KICKSIDE_READ_ONLY"

EXIT_CODES_HELP = (
    "Exit codes: 0 success, 1 failure, 2 usage error, 3 not found, "
    "4 conflict (continue or retry), 5 database unavailable, 130 interrupted."
)


@dataclass
class CliState:
    """Options given to the root command, and the database opened from them on first use."""

    database_url: str | None = None
    schema: str | None = None
    read_only: bool = False
    _db: Database | None = field(default=None, repr=False)

    def database(self, *, create: bool = False) -> Database:
        """The database, opened on first use.

        ``create``: a SQLite file that does not exist may be created (``migrate``, ``demo``);
        for every other command a missing file is a usage error (exit 2), so a mistyped path
        never leaves an empty database behind.
        """
        if self._db is None:
            self._db = connect_database(self.database_url, schema=self.schema, create=create)
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.dispose()
            self._db = None


def state(ctx: typer.Context) -> CliState:
    """The :class:`CliState` of the running command."""
    root = ctx.find_root()
    if not isinstance(root.obj, CliState):
        root.obj = CliState()
    return root.obj


def open_database(ctx: typer.Context) -> Database:
    """The command's database, refusing (exit 1) a schema that is not at the current revision.

    Reads and actions on an old or empty schema would fail half-way with a driver error;
    checking first gives one clear line: run ``kickside migrate``.
    """
    db = state(ctx).database()
    migrate.ensure_current(db)
    return db


def writes(func: Callable[P, R]) -> Callable[P, R]:
    """Mark a command that changes the database: under ``--read-only`` it is refused (exit 2).

    The refusal comes before the command opens the database or asks for confirmation. Put it
    below :func:`handles_errors`, which turns the refusal into one line on stderr.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        # Typer hands commands its Click context (typer.Context is only the annotation).
        ctx: Any = next((a for a in (*args, *kwargs.values()) if hasattr(a, "find_root")), None)
        if ctx is not None and state(ctx).read_only:
            raise ReadOnlyError(
                f"read-only: `{ctx.command_path}` changes the database "
                "(run it without --read-only, with a role that may write)"
            )
        return func(*args, **kwargs)

    return wrapper


#: Largest number of seconds a duration option takes (about 31 years).
MAX_SECONDS = 1e9
_APP_SPEC = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?::[A-Za-z_]\w*)?")


def duration(value: float, option: str, *, minimum: float = 0.0) -> timedelta:
    """A duration option in seconds: a finite number in ``minimum..MAX_SECONDS`` (else exit 2)."""
    if not math.isfinite(value) or not minimum <= value <= MAX_SECONDS:
        raise InvalidArgumentError(
            f"{option} must be a number of seconds in {minimum:g}..{MAX_SECONDS:g}, got {value}"
        )
    return timedelta(seconds=value)


def app_spec(value: str, option: str = "--app") -> str:
    """``module`` or ``module:attribute`` (dotted Python names), else a usage error (exit 2)."""
    if not _APP_SPEC.fullmatch(value):
        raise InvalidArgumentError(
            f"{option} must name a module or module:attribute, got {value[:80]!r}"
        )
    return value


def now() -> datetime:
    """The application clock's time for this command (timezone-aware UTC)."""
    return utcnow()


def actor() -> Actor:
    """Who runs this command: the OS user and host, recorded in the audit trail."""
    return Actor.current()


def job_id(value: str) -> uuid.UUID:
    """A job id given on the command line; a malformed one is a usage error (exit 2)."""
    return parse_job_id(value)


def json_object(text: str, option: str) -> dict[str, Any]:
    """Decode ``text`` as a JSON object; anything else is a usage error naming ``option``."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"{option} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError(
            f"{option} must be a JSON object, got {type(value).__name__}"
        )
    return value


def record_action(
    db: Database,
    action: str,
    target_type: str,
    target: str,
    details: Mapping[str, Any],
    when: datetime,
) -> None:
    """Record an operator action whose engine call takes no actor, in its own transaction."""
    with db.begin() as conn:
        record_audit(conn, db, actor(), action, target_type, target, details, when)


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn errors into a one-line message on stderr and the documented exit code.

    A Kickside error exits with its ``exit_code``. A conflict's details (how to continue or
    retry) follow its message in parentheses, or with ``--json`` are printed on stdout as
    ``{"error": ..., "details": ...}`` for scripts. Any other exception is a failure (exit 1)
    shown as one redacted line, never a traceback.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except KicksideError as exc:
            message = " ".join(redact_text(str(exc)).split("\n"))
            details = exc.details if isinstance(exc, ConflictError) else {}
            if details and kwargs.get("as_json"):
                output.error(escape(message))
                output.emit_json({"error": message, "details": redact_value(details)})
            elif details:
                facts = redact_text(", ".join(f"{k}={v}" for k, v in details.items()))
                output.error(escape(f"{message} ({facts})"))
            else:
                output.error(escape(message))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            output.error("interrupted")
            raise typer.Exit(130) from None
        except Exception as exc:
            output.error(escape(redact_text(f"{type(exc).__name__}: {_one_line(exc)}")))
            raise typer.Exit(1) from None

    return wrapper


def unused(*_: Any) -> None:
    """Mark a value as deliberately unused."""
