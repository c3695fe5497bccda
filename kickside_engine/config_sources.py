"""Every pool and worker option, read along one precedence path: flag > environment
(``KICKSIDE_*``) > a configuration file > default.

:data:`OPTIONS` is the one table of options: ``kickside worker`` builds its flags from it,
``kickside config`` shows it, and an embedding application builds a
:class:`~kickside_engine.runtime.PoolConfig` from the environment and the file with
:func:`load_pool_config`. Adding an option is one :class:`Option` entry (and, for the pool, a
line in :meth:`ResolvedConfig.pool_kwargs`).

The file: ``--config PATH`` or ``KICKSIDE_CONFIG`` when given (it must exist); else the first
directory from the current one upwards that holds a ``kickside.toml`` (keys at its top level)
or a ``pyproject.toml`` with a ``[tool.kickside]`` table (the same keys), as ruff and pytest
find theirs; in one directory ``kickside.toml`` wins. Worker options live in a ``[worker]``
sub-table. An unknown key is an error naming the key and the file, so a typo is never silent;
a bad value gets the error its flag gets, naming the file and key instead of the flag.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine import URL

from kickside_engine.config import display_url, parse_database_url
from kickside_engine.config_values import (
    parse_count,
    parse_flag,
    parse_grace,
    parse_lease,
    parse_log_format,
    parse_log_level,
    parse_module_spec,
    parse_poll_interval,
    parse_port,
    parse_queue_lease_table,
    parse_queue_table,
    parse_retention,
    parse_text,
    parse_url,
)
from kickside_engine.errors import ConfigurationError, KicksideError
from kickside_engine.logs import LOG_FORMATS, LOG_LEVELS
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.store.sqlite_durability import (
    DEFAULT_SYNCHRONOUS,
    SYNCHRONOUS_ENV,
    SYNCHRONOUS_PARAM,
    synchronous_choice,
)

#: Names the configuration file (``--config`` does too); it must exist.
CONFIG_ENV = "KICKSIDE_CONFIG"
KICKSIDE_TOML = "kickside.toml"
PYPROJECT_TOML = "pyproject.toml"
#: The sub-table of the worker options.
WORKER_SECTION = "worker"

Parser = Callable[[Any, str], Any]


# --- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    """One option: its flag, environment variable, file key, default and parser.

    ``default`` is given as a flag would give it (``"30s"``) and parsed like one; ``None``
    means unset, which ``unset`` describes (``"host:pid"``). ``secret``: shown masked.
    """

    name: str
    flag: str
    key: str
    default: Any
    parse: Parser
    help: str
    env: str | None = None
    metavar: str | None = None
    unset: str = ""
    secret: bool = False

    def __post_init__(self) -> None:
        if self.env is None:
            object.__setattr__(self, "env", f"KICKSIDE_{self.name.upper()}")

    @property
    def section(self) -> str | None:
        """``"worker"`` for a worker option, ``None`` for a global one."""
        head, dot, _ = self.key.rpartition(".")
        return head if dot else None

    def show(self, value: Any) -> str:
        """The value as ``kickside config`` shows it (a secret masked)."""
        if value is None:
            return f"({self.unset})" if self.unset else ""
        if self.secret:
            return display_url(value)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, timedelta):
            return _duration_text(value)
        if isinstance(value, Mapping):
            sep = "=" if self.name == "queue_leases" else ":"
            return ",".join(
                f"{k}{sep}{self.show(v) if isinstance(v, timedelta) else v}"
                for k, v in value.items()
            )
        return str(value)


def _duration_text(value: timedelta) -> str:
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


_W = WORKER_SECTION
OPTIONS: tuple[Option, ...] = (
    Option("database_url", "--database-url", "database_url", None, parse_url,
           "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB.", metavar="URL",
           unset="the embedded SQLite file", secret=True),
    Option("schema", "--schema", "schema", None, parse_text,
           "PostgreSQL schema for Kickside's tables.", metavar="NAME", unset="none"),
    Option("read_only", "--read-only", "read_only", False, parse_flag,
           "Refuse every command that would change the database."),
    Option("app", "--app", f"{_W}.app", None, parse_module_spec,
           "Module with a WorkerRegistry (module or module:attribute).", metavar="MODULE",
           unset="required"),
    Option("queues", "--queues", f"{_W}.queues", "default:10,mailers:5", parse_queue_table,
           "Queues and per-node concurrency: name:count,...", metavar="QUEUES"),
    Option("in_process", "--in-process", f"{_W}.in_process", False, parse_flag,
           "Run jobs on threads of this process (no kill on timeout)."),
    Option("shutdown_grace", "--shutdown-grace", f"{_W}.shutdown_grace", "25", parse_grace,
           "Seconds (or 30s, 2m, ...) to wait for running jobs on shutdown.",
           metavar="SECONDS"),
    Option("lease", "--lease", f"{_W}.lease", "30s", parse_lease,
           "How long a claim holds a job unrenewed (30s, 2m, ...), renewed every third of "
           "it. A job whose lease cannot be renewed in time (database away) is stopped: use "
           "at least twice your database's failover time (docs: Deploying, the lease and "
           "database failovers).",
           metavar="DURATION"),
    Option("queue_leases", "--queue-leases", f"{_W}.queue_leases", None,
           parse_queue_lease_table, "Queues with a lease of their own: queue=duration,... "
           "(e.g. reports=5m).", metavar="LEASES", unset="none"),
    Option("node", "--node", f"{_W}.node", None, parse_text, "Node name.", metavar="NAME",
           unset="host:pid"),
    Option("log_level", "--log-level", f"{_W}.log_level", "INFO", parse_log_level,
           f"Log records from this level on, to stderr: {', '.join(LOG_LEVELS)}.",
           metavar="LEVEL"),
    Option("log_format", "--log-format", f"{_W}.log_format", "text", parse_log_format,
           f"How log records are written: {' or '.join(LOG_FORMATS)} (one JSON object a "
           "line, the same fields, redacted alike).", metavar="FORMAT"),
    Option("metrics_port", "--metrics-port", f"{_W}.metrics_port", None, parse_port,
           "Serve Prometheus metrics on this port, at /metrics (needs kickside[metrics]).",
           metavar="PORT", unset="off"),
    Option("prefetch", "--prefetch", f"{_W}.prefetch", None, parse_count,
           "Jobs claimed ahead of free executors while jobs are fast (0: off).",
           metavar="COUNT",
           unset="what the executors get through in one database turn, 2-96 per place"),
    Option("process_executors", "--process-executors", f"{_W}.process_executors", None,
           parse_count, "Executor processes for sync jobs, one job each.", metavar="COUNT",
           unset="the concurrency of the queues sync workers may use (all but those only "
           "async def workers declare) if the app has sync workers, else 0"),
    Option("async_executors", "--async-executors", f"{_W}.async_executors", None, parse_count,
           "Executor processes with an event loop for async def jobs.", metavar="COUNT",
           unset="1 if the app has async def workers, else 0"),
    Option("async_slots", "--async-slots", f"{_W}.async_slots", None, parse_count,
           "async def jobs each async executor runs at once.", metavar="COUNT",
           unset="the sum of the queues' concurrency"),
    Option("handoff_batch", "--handoff-batch", f"{_W}.handoff_batch", None, parse_count,
           "Jobs handed to a process executor at once, run one after another (1: one at a "
           "time).", metavar="COUNT", unset="4 while jobs take under 1 ms, else 1"),
    Option("poll_interval", "--poll-interval", f"{_W}.poll_interval", "1", parse_poll_interval,
           "Seconds between polls for due jobs that no wake-up announced (0.5, 2s, 1m).",
           metavar="SECONDS"),
    Option("schedule", "--schedule", f"{_W}.schedule", None, parse_module_spec,
           "The cron schedule to run: MODULE[:ATTRIBUTE] (default attribute SCHEDULE).",
           metavar="MODULE[:ATTRIBUTE]", unset="the app module's SCHEDULE, if any"),
    Option("prune_after", "--prune-after", f"{_W}.prune_after", "7d", parse_retention,
           "Delete completed, cancelled and discarded jobs this long after they finished: "
           "7d, 12h, 30m, 45s or seconds.", metavar="DURATION"),
)  # fmt: skip
#: Not an option of its own: shown by ``kickside config`` beside a SQLite URL, it comes from
#: the URL's ``?synchronous=``, else :data:`SYNCHRONOUS_ENV`, else the default
#: (:mod:`~kickside_engine.store.sqlite_durability`).
SQLITE_SYNCHRONOUS = Option(
    "sqlite_synchronous", "", "", DEFAULT_SYNCHRONOUS, parse_text,
    "How durable a SQLite commit is: off, normal, full or extra (the database URL's "
    f"?{SYNCHRONOUS_PARAM}=, else {SYNCHRONOUS_ENV}).", env=SYNCHRONOUS_ENV,
)  # fmt: skip
OPTIONS_BY_NAME = {option.name: option for option in OPTIONS}
GLOBAL_OPTIONS = tuple(o.name for o in OPTIONS if o.section is None)
WORKER_OPTIONS = tuple(o.name for o in OPTIONS if o.section == WORKER_SECTION)


# --- the file ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigFile:
    """A configuration file's Kickside keys, flattened (``{"worker.lease": "30s"}``).

    ``prefix`` is where the keys sit in the file (``tool.kickside.`` in a pyproject.toml);
    ``found_by``: ``--config``, ``KICKSIDE_CONFIG`` or ``search``.
    """

    path: Path
    values: Mapping[str, Any]
    prefix: str = ""
    found_by: str = "search"

    def where(self, key: str) -> str:
        """``path:key`` as the file spells the key."""
        return f"{self.path}:{self.prefix}{key}"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigurationError(f"configuration file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigurationError(f"configuration file {path} is a directory") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"cannot read configuration file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path} is not valid TOML: {exc}") from None


def _pyproject_table(document: Mapping[str, Any]) -> Any:
    tool = document.get("tool")
    return tool.get("kickside") if isinstance(tool, Mapping) else None


def _flatten(table: Mapping[str, Any], path: Path, prefix: str) -> dict[str, Any]:
    """The file's keys checked against :data:`OPTIONS`; an unknown key is an error."""
    known = {o.key for o in OPTIONS}
    values: dict[str, Any] = {}
    for name, value in table.items():
        if name == WORKER_SECTION:
            if not isinstance(value, Mapping):
                raise ConfigurationError(
                    f"{path}: {prefix}{name} must be a table ([{prefix}{name}])"
                )
            values.update({f"{name}.{k}": v for k, v in value.items()})
        else:
            values[name] = value
    for key in values:
        if key not in known:
            raise ConfigurationError(
                f"{path}: unknown key {prefix}{key}{_hint(key, known, prefix)}"
            )
    return values


def _hint(key: str, known: set[str], prefix: str) -> str:
    """`` (did you mean worker.lease?)`` for a typo or a key in the wrong table, else the
    known keys."""
    moved = [k for k in sorted(known) if k.rpartition(".")[2] == key.rpartition(".")[2]]
    close = moved or difflib.get_close_matches(key, sorted(known), n=1)
    if close:
        return f" (did you mean {prefix}{close[0]}?)"
    return f"; known keys: {', '.join(prefix + k for k in sorted(known))}"


def read_config_file(path: str | Path, *, found_by: str = "search") -> ConfigFile:
    """Read a ``kickside.toml`` (keys at the top), or a ``pyproject.toml`` (its
    ``[tool.kickside]`` table, empty when it has none); refuse unknown keys."""
    path = Path(path)
    document = _read_toml(path)
    if path.name == PYPROJECT_TOML:
        table, prefix = _pyproject_table(document) or {}, "tool.kickside."
        if not isinstance(table, Mapping):
            raise ConfigurationError(f"{path}: tool.kickside must be a table")
    else:
        table, prefix = document, ""
    return ConfigFile(path, _flatten(table, path, prefix), prefix, found_by)


def find_config_file(
    explicit: str | Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> ConfigFile | None:
    """The configuration file: ``explicit`` (``--config``), else ``KICKSIDE_CONFIG``, else
    the nearest ``kickside.toml`` or ``pyproject.toml`` with ``[tool.kickside]`` from ``cwd``
    upwards; ``None`` when there is none."""
    environ = os.environ if environ is None else environ
    if explicit is not None and str(explicit) != "":
        return read_config_file(Path(explicit), found_by="--config")
    if environ.get(CONFIG_ENV):
        return read_config_file(Path(environ[CONFIG_ENV]), found_by=CONFIG_ENV)
    start = Path.cwd() if cwd is None else Path(cwd)
    for directory in (start.resolve(), *start.resolve().parents):
        if (directory / KICKSIDE_TOML).is_file():
            return read_config_file(directory / KICKSIDE_TOML)
        pyproject = directory / PYPROJECT_TOML
        if pyproject.is_file() and _pyproject_table(_read_toml(pyproject)) is not None:
            return read_config_file(pyproject)
    return None


# --- resolution --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resolved:
    """An option's effective value and where it came from.

    ``source``: ``flag``, ``env``, ``file`` or ``default``; ``origin`` names it: the flag,
    the variable, ``path:key`` or ``default``.
    """

    option: Option
    value: Any
    source: str
    origin: str

    def show(self) -> str:
        """The value as text, a secret masked."""
        return self.option.show(self.value)


@dataclass(frozen=True)
class ResolvedConfig:
    """The effective options (those asked for), and the file they were read from."""

    options: Mapping[str, Resolved]
    file: ConfigFile | None = None
    #: The SQLite ``synchronous`` mode in effect and its source (``url``: the URL option's
    #: source and origin, with ``?synchronous=``; ``env``; ``default``), when the database
    #: URL was resolved and names SQLite; else None.
    sqlite_synchronous: Resolved | None = None

    def value(self, name: str) -> Any:
        """The effective value of option ``name``."""
        return self.options[name].value

    def pool_kwargs(self) -> dict[str, Any]:
        """:class:`PoolConfig` keyword arguments from the worker options (``schedule``,
        ``log_level``, ``log_format``, ``metrics_port`` and ``registry`` are the caller's: they
        load code or set up logging and metrics)."""
        v = self.value
        return {
            "queues": v("queues"), "app": v("app"), "node": v("node"),
            "mode": "thread" if v("in_process") else "process",
            "shutdown_grace": v("shutdown_grace"), "lease": v("lease"),
            "queue_leases": v("queue_leases") or {}, "prefetch": v("prefetch"),
            "prune_after": v("prune_after"), "poll_interval": v("poll_interval"),
            "process_executors": v("process_executors"),
            "async_executors": v("async_executors"), "async_slots": v("async_slots"),
            "handoff_batch": v("handoff_batch"),
        }  # fmt: skip


def _parse(option: Option, raw: Any, what: str) -> Any:
    try:
        return option.parse(raw, what)
    except KicksideError as exc:
        message = str(exc)
        if what not in message:
            message = f"{what}: {message}"
        raise type(exc)(message, exc.details) from None


def resolve_config(
    flags: Mapping[str, Any] | None = None,
    *,
    file: ConfigFile | None = None,
    environ: Mapping[str, str] | None = None,
    names: Iterable[str] | None = None,
) -> ResolvedConfig:
    """Resolve options ``names`` (default: all): a flag in ``flags`` > the environment >
    ``file`` > the default. A flag given as ``None`` is given empty (the option unset)."""
    flags = flags or {}
    environ = os.environ if environ is None else environ
    file_values = file.values if file is not None else {}
    resolved: dict[str, Resolved] = {}
    for name in OPTIONS_BY_NAME if names is None else names:
        option = OPTIONS_BY_NAME[name]
        env = option.env or ""
        if name in flags:
            raw, source, origin = flags[name], "flag", option.flag
        elif environ.get(env, "") != "":
            raw, source, origin = environ[env], "env", env
        elif file is not None and option.key in file_values:
            raw, source, origin = file_values[option.key], "file", file.where(option.key)
        else:
            raw, source, origin = option.default, "default", "default"
        value = None if raw is None else _parse(option, raw, origin)
        resolved[name] = Resolved(option, value, source, origin)
    url = resolved.get("database_url")
    synchronous = _sqlite_synchronous(url, environ) if url is not None else None
    return ResolvedConfig(resolved, file, synchronous)


def _sqlite_synchronous(url: Resolved, environ: Mapping[str, str]) -> Resolved | None:
    """The SQLite ``synchronous`` mode the resolved URL gets (None when it is not SQLite; no
    URL is the embedded SQLite file)."""
    if url.value is None:  # the embedded file: no query of its own
        mode, source = synchronous_choice(URL.create("sqlite"), environ)
    else:
        parsed = parse_database_url(url.value)
        if parsed.get_backend_name() != "sqlite":
            return None
        mode, source = synchronous_choice(parsed, environ)
    if source == "url":
        origin = f"{url.origin} ?{SYNCHRONOUS_PARAM}="
        return Resolved(SQLITE_SYNCHRONOUS, mode, url.source, origin)
    if source == "env":
        return Resolved(SQLITE_SYNCHRONOUS, mode, "env", SYNCHRONOUS_ENV)
    return Resolved(SQLITE_SYNCHRONOUS, mode, "default", "default")


def load_config(
    flags: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    names: Iterable[str] | None = None,
) -> ResolvedConfig:
    """:func:`find_config_file`, then :func:`resolve_config`."""
    file = find_config_file(config_file, environ=environ, cwd=cwd)
    return resolve_config(flags, file=file, environ=environ, names=names)


def load_pool_config(
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    **overrides: Any,
) -> PoolConfig:
    """A :class:`PoolConfig` from the environment and the configuration file, as
    ``kickside worker`` reads them; ``overrides`` (``registry=``, ``mode="thread"``,
    ``schedule=``, any field) win over both.

    The database is the application's to open:
    ``load_config(names=["database_url", "schema"])`` resolves it the same way.
    """
    config = load_config(config_file=config_file, environ=environ, cwd=cwd, names=WORKER_OPTIONS)
    return PoolConfig(**{**config.pool_kwargs(), **overrides})


__all__ = [
    "CONFIG_ENV",
    "OPTIONS",
    "SQLITE_SYNCHRONOUS",
    "ConfigFile",
    "Option",
    "Resolved",
    "ResolvedConfig",
    "find_config_file",
    "load_config",
    "load_pool_config",
    "read_config_file",
    "resolve_config",
]
