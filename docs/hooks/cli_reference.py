"""The CLI reference, the environment variables, the exit codes and the pool's configuration,
written as Markdown from the code itself: the Click command trees of the ``kickside`` and
``kickside-tui`` Typer apps, the ``KicksideError`` family and ``PoolConfig``'s fields.

Nothing here is copied by hand: a command, option or error added to the code shows up in the
next build, and a mapping below that names something the code no longer has fails the build.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import typer

#: What each exit code means; the error codes in each row come from the error classes.
EXIT_MEANINGS = {
    0: "success",
    1: "failure: the database refused the login (a wrong user or password, no `pg_hba.conf` "
    "entry: not an outage, so not `5`), a write refused by a read-only role, a schema at "
    "another revision, a question answered no, anything unexpected; `doctor` and "
    "`migrate status` when something needs attention",
    2: "usage error: a malformed or ambiguous job id, an invalid option value (`--log-level "
    "LOUD` lists the levels), an unknown audit action, an empty required value, a bad URL, a "
    "SQLite file that does not exist or is not a database, a worker app that does not load, "
    "`--read-only` refusing a write, an action that needs confirmation run without a terminal "
    "and without `--yes`",
    3: "not found: a job, slot, revision, queue or capacity namespace (unknown names list the "
    "known ones)",
    4: "conflict that can be continued or retried (the details say how)",
    5: "database unavailable: only a connection that could not be made or was lost (worth "
    "retrying)",
    130: "interrupted (Ctrl-C), at a confirmation question too",
}
#: Error codes that no ``KicksideError`` class carries: Click's usage errors and Ctrl-C.
OTHER_CODES = {2: ("usage",), 130: ("interrupted",)}

#: What each ``PoolConfig`` field is for (a field missing here fails the build).
POOL_FIELDS = {
    "queues": "queue name -> per-node concurrency (executors for that queue)",
    "app": "import path of the module (or `module:attribute`) holding the `WorkerRegistry`; "
    "executor processes import it",
    "registry": 'the registry itself, for `mode="thread"` (embedding, tests)',
    "mode": '`"process"`: an executor process per unit of concurrency; `"thread"`: '
    "threads of this process (a job past its max execution cannot be killed there)",
    "node": "the node's name (default `host:pid:suffix`, the suffix telling two apart)",
    "lease": "how long a claim holds a job unrenewed; renewed every third of it (3 s to 1 day)",
    "queue_leases": 'queues with a lease of their own, e.g. `{"reports": timedelta(minutes=5)}`',
    "shutdown_grace": "how long a stopping pool waits for running jobs before leaving them to "
    "the Lifeline",
    "poll_interval": "seconds between polls for due jobs when no notification arrives",
    "default_max_execution": "a job's max execution when neither the job nor its worker sets one",
    "prune_after": "the Pruner deletes final jobs this long after they finished",
    "run_plugins": "run the Stager, Lifeline, Pruner and Cron in this pool",
    "code_version": "the code version a thread pool records on its runs (a process pool "
    "records what its executors load: the app module's `KICKSIDE_CODE_VERSION` or "
    "`__version__`, else a hash of its source)",
    "schedule": "cron entries (`Recurring`) this pool runs; `kickside worker` loads the app's "
    "`SCHEDULE`",
    "prefetch": "jobs claimed ahead of free executors while jobs are fast (None: automatic, "
    "0: off)",
    "process_executors": "process executors for sync jobs (None: the sum of the queues' "
    "concurrency, leaving out queues only `async def` workers declare)",
    "async_executors": "async executors for `async def` jobs (None: one when the app has an "
    "async worker, else none)",
    "async_slots": "how many jobs each async executor runs at once",
    "handoff_batch": "how many jobs an idle process executor is handed at once, to run one "
    "after another (None: 4 while jobs take under 1 ms, else 1; 1: one at a time)",
}

#: ``PoolConfig`` field -> the ``kickside worker`` option (or environment variable) that sets it.
POOL_OPTIONS = {
    "queues": "--queues",
    "app": "--app",
    "mode": "--in-process",
    "node": "--node",
    "lease": "--lease",
    "queue_leases": "--queue-leases",
    "shutdown_grace": "--shutdown-grace",
    "prune_after": "--prune-after",
    "schedule": "--schedule",
    "prefetch": "--prefetch",
}


def _apps() -> dict[str, Any]:
    from kickside_tui.app import cli as dashboard
    from kickside_tui.cli.main import app

    return {
        "kickside": typer.main.get_command(app),
        "kickside-tui": typer.main.get_command(dashboard),
    }


def walk(command: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under ``command`` (itself first), with its path of names."""
    yield path, command
    commands = getattr(command, "commands", {})
    for name in sorted(commands):
        yield from walk(commands[name], (*path, name))


def is_global(param: Any) -> bool:
    """A global option repeated on every command (shown once, under the root)."""
    from kickside_tui.cli.grammar import GLOBAL_PANEL

    return getattr(param, "rich_help_panel", None) == GLOBAL_PANEL


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _doc(command: Any) -> str:
    text = inspect.cleandoc(command.help or "")
    return text.replace("``", "`")


def _value(param: Any) -> str:
    """What an option takes: its metavar, else its type (with a range), nothing for a flag."""
    if getattr(param, "is_flag", False):
        return ""
    choices = param.type_descriptor.choices
    if choices:
        return " \\| ".join(f"`{c}`" for c in choices)
    text = param.metavar or param.bare_type().upper()
    low, high = param.min, param.max
    if low is not None and high is not None:
        text += f" ({low}..{high})"
    elif low is not None:
        text += f" (>= {low})"
    elif high is not None:
        text += f" (<= {high})"
    return _cell(text)


def _option_row(param: Any) -> str:
    if param.param_type_name == "argument":
        names = f"`{param.metavar or param.name.upper()}` (argument)"
    else:
        names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    default = param.default
    shown = ""
    if default not in (None, False, (), []) and not callable(default):
        shown = f"`{default}`"
    if param.required:
        shown = "required"
    envvar = getattr(param, "envvar", None)
    env = f"`{envvar}`" if isinstance(envvar, str) else ""
    repeat = " (repeatable)" if getattr(param, "multiple", False) else ""
    help_text = _cell(getattr(param, "help", None) or "") + repeat
    return f"| {names} | {_value(param)} | {shown} | {env} | {help_text} |"


def _params_table(params: list[Any]) -> list[str]:
    rows = [_option_row(p) for p in params if not getattr(p, "hidden", False)]
    rows = [r for r in rows if not r.startswith("| `--help`")]
    if not rows:
        return []
    return [
        "| option | value | default | environment | meaning |",
        "| --- | --- | --- | --- | --- |",
        *rows,
        "",
    ]


def cli_reference() -> str:
    """Every command of ``kickside`` and ``kickside-tui``: usage, help, arguments and options."""
    out: list[str] = []
    for program, root in _apps().items():
        for path, command in walk(root, (program,)):
            name = " ".join(path)
            level = "##" if len(path) == 1 else "###"
            out += [f"{level} `{name}`", ""]
            if len(path) > 1 or program == "kickside-tui":
                out += [_doc(command), ""]
            ctx = command.context_class(command, info_name=name)
            usage = " ".join(command.collect_usage_pieces(ctx))
            out += ["```text", f"{name} {usage}".rstrip(), "```", ""]
            own = [p for p in command.params if not is_global(p)]
            out += _params_table(own)
            if program == "kickside" and len(path) == 1:
                out += [
                    "Each of these also works after the command's name "
                    "(`kickside jobs --database-url URL`); given at both places, the one "
                    "after the command wins.",
                    "",
                ]
    return "\n".join(out)


def command_paths() -> list[str]:
    """Every ``kickside`` command, as typed (``queues pause``)."""
    root = _apps()["kickside"]
    return [" ".join(path[1:]) for path, _ in walk(root, ("kickside",)) if len(path) > 1]


def error_codes() -> dict[int, list[str]]:
    """The ``--json`` error codes by exit code: every ``KicksideError`` class's, and Click's."""
    from kickside_engine import KicksideError

    _apps()  # the dashboard's and the CLI's error classes are defined by their modules

    def subclasses(cls: type[KicksideError]) -> Iterator[type[KicksideError]]:
        yield cls
        for sub in cls.__subclasses__():
            yield from subclasses(sub)

    codes: dict[int, list[str]] = {code: [] for code in EXIT_MEANINGS}
    for error in subclasses(KicksideError):
        if error.exit_code not in codes:
            raise ValueError(f"{error.__name__} exits {error.exit_code}: no meaning for it here")
        if error.code not in codes[error.exit_code]:
            codes[error.exit_code].append(error.code)
    for exit_code, names in OTHER_CODES.items():
        codes[exit_code] = [*names, *codes[exit_code]]
    return codes


def exit_codes() -> str:
    """The exit-code table."""
    rows = ["| code | meaning | `--json` error code |", "| --- | --- | --- |"]
    for exit_code, names in error_codes().items():
        listed = ", ".join(f"`{n}`" for n in names)
        rows.append(f"| `{exit_code}` | {EXIT_MEANINGS[exit_code]} | {listed} |")
    return "\n".join(rows) + "\n"


def environment() -> str:
    """Every environment variable an option reads, with the commands that read it, and the
    engine's own (the embedded database's home)."""
    from kickside_engine.config import DATABASE_URL_ENV, HOME_ENV, SCHEMA_ENV

    found: dict[str, set[str]] = {}
    helps: dict[str, str] = {}
    for program, root in _apps().items():
        for path, command in walk(root, (program,)):
            for param in command.params:
                envvar = getattr(param, "envvar", None)
                if isinstance(envvar, str):
                    found.setdefault(envvar, set()).add(" ".join(path))
                    helps.setdefault(envvar, f"`{param.opts[0]}`: " + _cell(param.help or ""))
    rows = ["| variable | read by | what it sets |", "| --- | --- | --- |"]
    for envvar in sorted(found):
        users = sorted(found[envvar])
        where = ", ".join(f"`{u}`" for u in users)
        if "kickside" in users:
            rest = [f"`{u}`" for u in users if not u.startswith("kickside ")]
            where = ", ".join(["every `kickside` command", *rest[1:]])
        if envvar in (DATABASE_URL_ENV, SCHEMA_ENV):
            where += ", the engine (`connect_database()`)"
        rows.append(f"| `{envvar}` | {where} | {helps[envvar]} |")
    from kickside_engine.store.sqlite_durability import SYNCHRONOUS_ENV

    rows.append(
        f"| `{SYNCHRONOUS_ENV}` | the engine, hence `kickside`, `kickside worker` and "
        "`kickside-tui` | the SQLite `synchronous` mode (`off`, `normal`, `full`, `extra`; "
        "default `normal`) for URLs without `?synchronous=` |"
    )
    rows.append(
        f"| `{HOME_ENV}` | the engine, hence `kickside` and `kickside-tui` | the folder of the "
        "embedded SQLite file (`$KICKSIDE_HOME/kickside.sqlite3`) when no URL is configured |"
    )
    return "\n".join(rows) + "\n"


def duration(value: timedelta) -> str:
    """``7d``, ``25s``, ``1m30s``: a duration as the CLI's options take it."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _default(field: dataclasses.Field[Any]) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if isinstance(value, timedelta):
        return f"`{duration(value)}`"
    if value in ({}, (), None):
        return "none" if value is None else "empty"
    return f"`{value!r}`"


def pool_config() -> str:
    """``PoolConfig``'s fields, their defaults and the ``kickside worker`` option for each."""
    from kickside_engine.runtime import PoolConfig

    worker = _apps()["kickside"]
    options = {o for p in worker.commands["worker"].params for o in p.opts}
    rows = ["| field | default | `kickside worker` | what it is |", "| --- | --- | --- | --- |"]
    for field in dataclasses.fields(PoolConfig):
        option = POOL_OPTIONS.get(field.name, "")
        if option and option not in options:
            raise ValueError(f"PoolConfig.{field.name}: `kickside worker` has no {option}")
        if field.name not in POOL_FIELDS:
            raise ValueError(f"PoolConfig.{field.name} is not described in POOL_FIELDS")
        shown = f"`{option}`" if option else ""
        rows.append(f"| `{field.name}` | {_default(field)} | {shown} | {POOL_FIELDS[field.name]} |")
    unknown = set(POOL_OPTIONS) - {f.name for f in dataclasses.fields(PoolConfig)}
    if unknown:
        raise ValueError(f"PoolConfig has no fields {sorted(unknown)}")
    return "\n".join(rows) + "\n"
