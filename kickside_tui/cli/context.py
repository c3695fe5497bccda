"""Shared CLI state: the global options of a run (given before or after the command), the
database opened from them, job ids as the command line gives them, and error handling: one
line on stderr, the documented exit code, and the error document under ``--json``."""

from __future__ import annotations

import functools
import json
import math
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
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
    ReadOnlyError,
    connect_database,
    migrate,
)
from kickside_engine.control import (
    Actor,
    parse_uuid,
    record_audit,
    redact_text,
    redact_value,
    resolve_job_id,
    utcnow,
)
from kickside_engine.runtime import ConfigFile, ResolvedConfig, find_config_file, resolve_config
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
    """The global options of this run, and the database opened from them on first use.

    ``given``: the global options given on the command line (before or after the command),
    as against taken from the environment. ``database_url``, ``schema`` and ``read_only`` hold
    the command line's or the environment's value; :meth:`settings` adds the configuration
    file (``config_file``: ``--config``) and the defaults.
    """

    database_url: str | None = None
    schema: str | None = None
    read_only: bool = False
    json: bool = False
    wide: bool = False
    config_file: str | None = None
    given: set[str] = field(default_factory=set)
    _db: Database | None = field(default=None, repr=False)
    _file: ConfigFile | None = field(default=None, repr=False)
    _file_read: bool = field(default=False, repr=False)

    def given_option(self, name: str, value: Any) -> None:
        """A global option given after the command: it wins over the one before."""
        setattr(self, name, value)
        self.given.add(name)
        if name == "wide":
            output.configure(wide=bool(value))

    def file(self) -> ConfigFile | None:
        """The configuration file (``--config``, ``KICKSIDE_CONFIG``, else found), read once."""
        if not self._file_read:
            self._file = find_config_file(self.config_file)
            self._file_read = True
        return self._file

    def settings(
        self, flags: Mapping[str, Any] | None = None, names: Sequence[str] | None = None
    ) -> ResolvedConfig:
        """Options ``names`` (default: all) resolved: a global option given on the command
        line, or one of ``flags`` > ``KICKSIDE_*`` > the configuration file > the default."""
        given = {n: getattr(self, n) for n in _TABLE_GLOBALS if n in self.given}
        return resolve_config({**given, **(flags or {})}, file=self.file(), names=names)

    def is_read_only(self) -> bool:
        """``--read-only``, ``KICKSIDE_READ_ONLY`` or ``read_only`` in the file."""
        return bool(self.settings(names=["read_only"]).value("read_only"))

    def database(self, *, create: bool = False) -> Database:
        """The database, opened on first use.

        ``create``: a SQLite file that does not exist may be created (``migrate``, ``demo``);
        for every other command a missing file is a usage error (exit 2), so a mistyped path
        never leaves an empty database behind.
        """
        if self._db is None:
            where = self.settings(names=["database_url", "schema"])
            self._db = connect_database(
                where.value("database_url"), schema=where.value("schema"), create=create
            )
        return self._db

    def close(self) -> None:
        if self._db is not None:
            self._db.dispose()
            self._db = None


#: The global options that are entries of the option table.
_TABLE_GLOBALS = ("database_url", "schema", "read_only")


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
        ctx = _context(args, kwargs)
        if ctx is not None and state(ctx).is_read_only():
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


def job_id(ctx: typer.Context, value: str) -> uuid.UUID:
    """A job id given on the command line: a full UUID, or the last 8 to 12 hex digits of one
    (as tables show it). Malformed or ambiguous: a usage error (exit 2); no such job: exit 3."""
    parsed = parse_uuid(value)
    if parsed is not None:
        return parsed
    return resolve_job_id(open_database(ctx), value)


def names(values: Sequence[str] | None) -> tuple[str, ...]:
    """A repeatable option's values, each of which may be a comma-separated list."""
    return tuple(
        part.strip() for value in values or () for part in value.split(",") if part.strip()
    )


def json_object(text: str, option: str) -> dict[str, Any]:
    """Decode ``text`` as a JSON object; anything else is a usage error naming ``option``."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"{option} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{option} must be a JSON object, got {type(value).__name__}")
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
        record_audit(db, conn, actor(), action, target_type, target, details, when)


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _context(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
    # Typer hands commands its Click context (typer.Context is only the annotation).
    return next((a for a in (*args, *kwargs.values()) if hasattr(a, "find_root")), None)


def _report(exc: BaseException, as_json: bool) -> int:
    """Print ``exc`` as one line on stderr (and the error document under ``--json``); its
    exit code."""
    details: dict[str, Any] = {}
    if isinstance(exc, KeyboardInterrupt):
        code, exit_code, message = "interrupted", 130, "interrupted"
    elif isinstance(exc, KicksideError):
        code, exit_code = exc.code, exc.exit_code
        message = " ".join(redact_text(str(exc)).split("\n"))
        details = {k: redact_value(v) for k, v in exc.details.items()}
    else:
        code, exit_code = "failure", 1
        message = redact_text(f"{type(exc).__name__}: {_one_line(exc)}")
    if isinstance(exc, ConflictError) and details and not as_json:
        facts = redact_text(", ".join(f"{k}={v}" for k, v in exc.details.items()))
        output.error(escape(f"{message} ({facts})"))
    else:
        output.error(escape(message))
    if as_json:
        output.error_document(code, message, exit_code, details)
    return exit_code


def handles_errors(func: Callable[P, R]) -> Callable[P, R]:
    """Turn errors into a one-line message on stderr and the documented exit code.

    A Kickside error exits with its ``exit_code``; Ctrl-C with 130; any other exception is a
    failure (exit 1) shown as one redacted line, never a traceback. A conflict's details (how
    to continue or retry) follow its message in parentheses. Under ``--json`` (given to the
    command, to its group or before it) stdout also carries the error document,
    ``{"error": {"code", "message", "exit_code", "details"}}``.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        ctx = _context(args, kwargs)
        cli = state(ctx) if ctx is not None else None
        if cli is not None and "as_json" in kwargs:
            if kwargs["as_json"]:
                cli.json = True  # a group's --json holds for its subcommands
            elif cli.json:
                kwargs["as_json"] = True
        as_json = bool(kwargs.get("as_json")) or bool(cli and cli.json)
        try:
            return func(*args, **kwargs)
        except (typer.Exit, typer.Abort, TyperException):
            raise
        except (KicksideError, KeyboardInterrupt, Exception) as exc:
            raise typer.Exit(_report(exc, as_json)) from None

    return wrapper


def unused(*_: Any) -> None:
    """Mark a value as deliberately unused."""
