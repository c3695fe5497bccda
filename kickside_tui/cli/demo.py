"""`kickside demo`: a realistic live workload, on a database of its own.

The demo runs on ``kickside-demo.sqlite3`` beside the embedded default file, never on the
default file itself (applications use it) nor on ``KICKSIDE_DATABASE_URL`` (an application's
environment sets it). ``--database-url`` or ``--schema`` given on the command line choose
another database; one that holds anything not the demo's is refused unless ``--force``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from kickside_engine import ConfigurationError, Database, JobState, migrate
from kickside_engine.config import SCHEMA_ENV
from kickside_engine.control import overview, utcnow
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, state, writes
from kickside_tui.extras import missing_modules

if TYPE_CHECKING:
    from kickside_tui.demo.workload import Demo


def demo(
    ctx: typer.Context,
    seconds: Annotated[
        float | None, typer.Option("--seconds", min=1, help="Stop after this long.")
    ] = None,
    dashboard: Annotated[
        bool, typer.Option("--dashboard", help="Open the live dashboard over it.")
    ] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed the traffic generator.")] = None,
    reset: Annotated[
        bool,
        typer.Option(
            "--reset",
            help="Empty the demo's database first (refused on a database that is not the demo's).",
        ),
    ] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Write into a database that holds data not the demo's (an application's!).",
        ),
    ] = False,
) -> None:
    """Run a demo workload (queues, slots, a capacity group, retries, cron, a paused queue).

    It runs on a database of its own (kickside-demo.sqlite3 beside the embedded default
    file) unless --database-url or --schema is given, and everything it writes is named demo-
    or demo. so it cannot be taken for an application's.
    """
    run_demo(ctx, seconds, dashboard, seed, reset=reset, force=force)


def _open(ctx: typer.Context) -> tuple[Database, bool]:
    """The demo's database, and whether it is the demo's own file (no database was chosen)."""
    from kickside_tui.demo import database as demo_database

    cli = state(ctx)
    chosen = bool(cli.given & {"database_url", "schema"})  # not from the environment
    if not chosen:
        if cli.database_url or cli.schema:
            output.note(
                "KICKSIDE_DATABASE_URL and KICKSIDE_SCHEMA are not used: the demo runs on a "
                "database of its own (give --database-url to choose one)"
            )
        demo_database.default_path().parent.mkdir(parents=True, exist_ok=True)
        cli.database_url, cli.schema = demo_database.default_url(), None
        cli.given |= {"database_url", "schema"}  # nor a configuration file's
        # Opened now, while KICKSIDE_SCHEMA cannot fill in the schema the file has none of.
        with _environment_without(SCHEMA_ENV):
            return cli.database(create=True), True
    return cli.database(create=True), False


@contextlib.contextmanager
def _environment_without(name: str) -> Iterator[None]:
    saved = os.environ.pop(name, None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ[name] = saved


@handles_errors
@writes
def run_demo(
    ctx: typer.Context,
    seconds: float | None,
    dashboard: bool,
    seed: int | None,
    *,
    reset: bool = False,
    force: bool = False,
) -> None:
    from kickside_tui.demo import database as demo_database
    from kickside_tui.demo.workload import Demo

    if dashboard and missing_modules(("textual",)):
        raise ConfigurationError(
            "--dashboard needs textual, which the tui extra installs: pip install 'kickside[tui]'"
        )
    db, own = _open(ctx)
    where = demo_database.describe(db)
    found = demo_database.foreign_data(db)  # before anything is written, migrations included
    if found and (reset or not force):
        verb, hint = (
            ("reset", "")
            if reset
            else (
                "run the demo on",
                " (the demo runs on a database of its own unless given --database-url; "
                "--force writes into this one anyway)",
            )
        )
        raise demo_database.not_the_demos(db, verb, found, hint)
    if found:
        output.note(
            f"[bold red]WARNING: --force: the demo writes fake jobs, a paused queue and capacity "
            f"limits into {escape(where)}, which holds data that is not the demo's: "
            f"{escape('; '.join(found))}[/]"
        )
    migrate.upgrade(db)
    if reset:
        removed = demo_database.reset(db)
        summary = ", ".join(f"{count} {kind}" for kind, count in removed.items() if count)
        output.note(f"emptied the demo's database {escape(where)} ({summary or 'it was empty'})")
    show = output.note
    demo = Demo(db, seed=seed, report=lambda message: show(escape(message)))
    whose = "the demo's own database" if own else "the database given"
    output.note(f"demo workload on {escape(where)}, {whose} (Ctrl-C to stop)")
    demo.start()
    try:
        with _sigterm_raises(_Terminated), contextlib.suppress(_Terminated):
            _run_until_stopped(db, demo, dashboard, seconds)
    finally:
        output.note(f"stopping the demo workload (its data stays in {escape(where)})")
        with _sigterm_raises(None):  # a second SIGTERM must not cut the stop short
            demo.stop()


class _Terminated(BaseException):
    """SIGTERM arrived: stop the demo as Ctrl-C would, and exit 0 (a requested stop).

    A ``BaseException``, like ``KeyboardInterrupt``, so that no ``except Exception`` that rides
    out a database outage swallows it.
    """


@contextlib.contextmanager
def _sigterm_raises(exc: type[BaseException] | None) -> Iterator[None]:
    """While inside, SIGTERM raises ``exc`` in the main thread (or is ignored for ``None``)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        if exc is not None:
            raise exc()

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _run_until_stopped(db: Database, demo: Demo, dashboard: bool, seconds: float | None) -> None:
    """The dashboard until it is closed, or status lines until ``seconds`` pass (or forever)."""
    from kickside_tui.demo.workload import describe

    show = output.note
    if dashboard:
        from kickside_tui.adapter import Adapter
        from kickside_tui.app import KicksideApp
        from kickside_tui.demo.workload import SCHEDULE
        from kickside_tui.quiet_logs import kickside_logs_off_the_screen

        with kickside_logs_off_the_screen():
            KicksideApp(Adapter(db, schedule=SCHEDULE)).run()
    else:
        schema = f" --schema {db.schema}" if db.schema else ""
        output.note(escape(f"watch it: kickside-tui --database-url {db.display_url()}{schema}"))
        deadline = time.monotonic() + seconds if seconds else None
        unavailable = False
        while deadline is None or time.monotonic() < deadline:
            time.sleep(min(5.0, max(0.1, (deadline or 1e18) - time.monotonic())))
            try:
                ov = overview(db, utcnow())
            except Exception as exc:  # an outage: the pool and the traffic ride it out
                if not unavailable:
                    show(escape(f"demo status unavailable: {describe(exc)} (retrying)"))
                unavailable = True
                continue
            unavailable = False
            output.note(
                f"completed/min {ov.completed_last_minute}  failed/min "
                f"{ov.failed_last_minute}  executing {ov.totals[JobState.EXECUTING]}  "
                f"available {ov.totals[JobState.AVAILABLE]}  nodes {ov.nodes_alive}"
            )
