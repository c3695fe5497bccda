"""`kickside-tui`: the live dashboard over a Kickside database.

One screen per view, each a Textual mode reachable by a digit key and from the command palette.
The app refreshes the current view every ``refresh_seconds`` (database work runs in thread
workers, so the UI never waits on the database) and, on PostgreSQL, also when a change commits
(the engine's notifications, at most one refresh per ``NOTIFY_DEBOUNCE_S``). Through an outage
it shows a banner and retries with capped exponential backoff (:mod:`kickside_tui.reconnect`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer
from textual.actions import ActionParseResult
from textual.actions import parse as parse_action
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer

from kickside_engine import (
    InvalidArgumentError,
    KicksideError,
    Recurring,
    Subscription,
    connect_database,
)
from kickside_engine.config import DATABASE_URL_ENV, SCHEMA_ENV
from kickside_engine.control import load_schedule as load_app_schedule
from kickside_tui.adapter import Adapter
from kickside_tui.cli.context import READ_ONLY_ENV
from kickside_tui.commands import DashboardCommands
from kickside_tui.quiet_logs import kickside_logs_off_the_screen
from kickside_tui.reconnect import Reconnect
from kickside_tui.screens.base import ViewLoaded, ViewLoadFailed, ViewScreen
from kickside_tui.screens.capacity import CapacityScreen
from kickside_tui.screens.help import HelpScreen
from kickside_tui.screens.job import JobScreen
from kickside_tui.screens.jobs import JobsScreen
from kickside_tui.screens.jump import Jump, JumpScreen
from kickside_tui.screens.leases import LeasesScreen
from kickside_tui.screens.metrics import MetricsScreen
from kickside_tui.screens.ops import OpsScreen
from kickside_tui.screens.overview import OverviewScreen
from kickside_tui.screens.slots import SlotsScreen
from kickside_tui.widgets.chrome import VIEWS
from kickside_tui.widgets.view_table import JobChosen

SCREENS: dict[str, type[ViewScreen]] = {
    "overview": OverviewScreen,
    "jobs": JobsScreen,
    "slots": SlotsScreen,
    "leases": LeasesScreen,
    "capacity": CapacityScreen,
    "metrics": MetricsScreen,
    "ops": OpsScreen,
}
ViewT = TypeVar("ViewT", bound=ViewScreen)
MIN_REFRESH = 0.2
MAX_REFRESH = 60.0
#: A burst of notifications refreshes the view at most once per this many seconds.
NOTIFY_DEBOUNCE_S = 0.25


@dataclass
class DatabaseNotified(Message):
    """A change committed in the database (posted from the listening thread)."""

    payload: str


class KicksideApp(App[None]):
    """The dashboard; everything it shows and does goes through ``adapter``."""

    CSS_PATH = "app.tcss"
    TITLE = "Kickside"
    COMMANDS = App.COMMANDS | {DashboardCommands}
    BINDINGS = [
        *(Binding(key, f"view('{name}')", label, show=False) for name, key, label in VIEWS),
        Binding("question_mark", "help", "Help"),
        Binding("colon", "jump", "Go to a view by name", show=False),
        Binding("g", "refresh_now", "Refresh", show=False),
        Binding("plus", "interval(0.5)", "Faster", show=False),
        Binding("minus", "interval(2.0)", "Slower", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, adapter: Adapter, *, refresh_seconds: float = 1.0) -> None:
        super().__init__()
        if not MIN_REFRESH <= refresh_seconds <= MAX_REFRESH:
            raise InvalidArgumentError(
                f"refresh must be {MIN_REFRESH}..{MAX_REFRESH} seconds, got {refresh_seconds}"
            )
        self.adapter = adapter
        self.refresh_seconds = refresh_seconds
        self._timer: Timer | None = None
        self._subscription: Subscription | None = None
        self._sigterm_exits = False
        self._notify_timer: Timer | None = None
        self._notified_refresh_at = 0.0
        #: Notifications received, and the refreshes they caused (tests read these).
        self.notifications = 0
        self.notified_refreshes = 0
        #: The retry schedule while loads fail, and the timer of its next try.
        self.reconnect = Reconnect()
        self._retry_timer: Timer | None = None
        for name, view in SCREENS.items():
            self.add_mode(name, lambda view=view: self._view(view(adapter)))  # type: ignore[misc]

    def _view(self, view: ViewT) -> ViewT:
        """``view``, counting down to this app's retry schedule (attributes down)."""
        view.reconnect = self.reconnect
        return view

    @property
    def read_only(self) -> bool:
        return self.adapter.read_only

    def on_mount(self) -> None:
        self._subscription = self.adapter.listen(self._notified)
        self._describe()
        self.switch_mode("overview")
        self._timer = self.set_interval(self.refresh_seconds, self._refresh_on_timer)
        self._sigterm_exits = self._exit_on_sigterm()

    def _exit_on_sigterm(self) -> bool:
        """SIGTERM (``kill``, a service manager) closes the dashboard as ``q`` does, so the
        terminal is restored and whatever runs after the app (the demo's stop) still runs."""
        if threading.current_thread() is not threading.main_thread():
            return False
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.exit)
        except (NotImplementedError, RuntimeError):  # no signals here (Windows, no loop)
            return False
        return True

    def on_unmount(self) -> None:
        if self._sigterm_exits:
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGTERM)
        if self._subscription is not None:
            self._subscription.stop()

    @property
    def listening(self) -> bool:
        """Whether the dashboard is connected to the database's notifications."""
        return self._subscription is not None and self._subscription.connected.is_set()

    def _describe(self) -> None:
        every = f"every {self.refresh_seconds:g}s"
        live = self._subscription is not None and self._subscription.hears_other_processes
        parts = [self.adapter.describe(), every + (" and on change" if live else "")]
        if self.read_only:
            parts.append("read-only")
        self.sub_title = " · ".join(parts)

    def refresh_views(self, *, auto: bool = False) -> None:
        """Reload the data of the view on screen (a dialog above it leaves it refreshing).

        ``auto`` marks a refresh nobody asked for (timer, notification): a view may skip it
        when it would be costly (a long search).
        """
        for screen in self.screen_stack:
            if isinstance(screen, ViewScreen):
                if auto:
                    screen.auto_reload()
                else:
                    screen.reload()

    def _refresh_on_timer(self) -> None:
        if self.reconnect.waiting:
            return  # loads are failing: the backoff decides when to try again
        self.refresh_views(auto=True)

    def on_view_loaded(self, message: ViewLoaded) -> None:
        self.load_succeeded()
        message.view.set_problem(None)

    def on_view_load_failed(self, message: ViewLoadFailed) -> None:
        self.load_failed()
        message.view.set_problem(message.problem)

    def load_failed(self) -> None:
        """A view could not load: schedule the next try with backoff, unless one is."""
        delay = self.reconnect.failed(self.refresh_seconds)
        if delay is None:
            return
        if self._retry_timer is not None:
            self._retry_timer.stop()
        self._retry_timer = self.set_timer(delay, self._retry)

    def load_succeeded(self) -> None:
        """A view loaded: back to refreshing every ``refresh_seconds``."""
        if self._retry_timer is not None:
            self._retry_timer.stop()
            self._retry_timer = None
        self.reconnect.succeeded()

    def _retry(self) -> None:
        self._retry_timer = None
        self.reconnect.retrying()
        self.refresh_views()

    def _notified(self, payload: str) -> None:
        self.post_message(DatabaseNotified(payload))  # from the listening thread: thread-safe

    def on_database_notified(self, message: DatabaseNotified) -> None:
        self.notifications += 1
        if self._notify_timer is not None:
            return  # a refresh is already on its way
        wait = self._notified_refresh_at + NOTIFY_DEBOUNCE_S - time.monotonic()
        self._notify_timer = self.set_timer(max(wait, 0.01), self._refresh_on_notify)

    def _refresh_on_notify(self) -> None:
        self._notify_timer = None
        self._notified_refresh_at = time.monotonic()
        self.notified_refreshes += 1
        self.refresh_views(auto=True)

    async def run_action(
        self,
        action: str | ActionParseResult,
        default_namespace: DOMNode | None = None,
        namespaces: Mapping[str, DOMNode] | None = None,
    ) -> bool:
        """Run ``action``; a view's write action refused in read-only mode says so in a toast.

        Views disable their write actions in read-only mode (``check_action``), so the footer
        shows them dimmed; a key bound to one would otherwise do nothing without a word.
        """
        if await super().run_action(action, default_namespace, namespaces):
            return True
        if self.read_only and isinstance(default_namespace, ViewScreen):
            name = action[1] if isinstance(action, tuple) else parse_action(action)[1]
            if name in default_namespace.WRITE_ACTIONS:
                self.notify(
                    f"read-only dashboard: {_label(default_namespace, action)} is disabled "
                    "(started with --read-only or KICKSIDE_READ_ONLY)",
                    severity="warning",
                )
                return True
        return False

    def view_screen(self) -> ViewScreen | None:
        """The view of the current mode."""
        return next((s for s in self.screen_stack if isinstance(s, ViewScreen)), None)

    def action_view(self, name: str) -> None:
        self.switch_mode(name)

    def action_jump(self) -> None:
        """The ``:`` prompt: a view by name, or a job by id."""

        def jumped(jump: Jump | None) -> None:
            if jump is None:
                return
            if jump.job_id is not None:
                self.open_job(jump.job_id)
            elif jump.view == "help":
                self.action_help()
            elif jump.view is not None:
                self.switch_mode(jump.view)

        if not isinstance(self.screen, JumpScreen):
            self.push_screen(JumpScreen(), jumped)

    def on_job_chosen(self, message: JobChosen) -> None:
        """Enter on a row that is a job, on any view: open that job."""
        self.open_job(message.job_id)

    def open_job(self, job_id: uuid.UUID) -> None:
        """Show one job's detail and live log over the current view (escape returns)."""
        view = self.view_screen()
        job = JobScreen(self.adapter, job_id, view=view.VIEW if view else "")
        self.push_screen(self._view(job))

    def action_refresh_now(self) -> None:
        self.refresh_views()

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_interval(self, factor: float) -> None:
        """Multiply the refresh interval by ``factor``, within MIN_REFRESH..MAX_REFRESH."""
        seconds = self.refresh_seconds * factor
        self.set_refresh(min(max(seconds, MIN_REFRESH), MAX_REFRESH))

    def set_refresh(self, seconds: float) -> None:
        """Refresh every ``seconds`` from now on."""
        self.refresh_seconds = seconds
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_interval(seconds, self._refresh_on_timer)
        self._describe()
        self.notify(f"refreshing every {seconds:g}s")

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        for name, key, label in VIEWS:
            yield SystemCommand(
                f"View: {label}",
                f"Show the {label} view (key {key})",
                lambda name=name: self.switch_mode(name),
            )
        yield SystemCommand("Refresh now", "Reload the current view", self.refresh_views)
        for label, verb, factor, key in (
            ("faster", "Halve", 0.5, "+"),
            ("slower", "Double", 2.0, "-"),
        ):
            yield SystemCommand(
                f"Refresh {label}",
                f"{verb} the refresh interval (key {key})",
                lambda factor=factor: self.action_interval(factor),
            )
        yield SystemCommand("Help", "Keys, views and state colours", self.action_help)
        view = self.view_screen()
        if view is not None:
            yield from view.palette_commands()
        yield from super().get_system_commands(screen)


def _label(view: ViewScreen, action: str | ActionParseResult) -> str:
    """What ``view``'s footer calls ``action`` (``Bulk discard``), else the action's name."""
    name = action[1] if isinstance(action, tuple) else parse_action(action)[1]
    for binding in view.BINDINGS:
        if isinstance(binding, Binding) and binding.action == action and binding.description:
            return binding.description
    return name


def load_schedule(spec: str) -> list[Recurring]:
    """The cron schedule named ``module`` or ``module:ATTRIBUTE`` (default ``SCHEDULE``)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the app module is found from here
    return list(load_app_schedule(spec))


cli = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@cli.command()
def run(
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            envvar=DATABASE_URL_ENV,
            show_envvar=True,
            show_default=False,
            help="sqlite:///PATH or postgresql+psycopg://USER@HOST/DB "
            "(default: the embedded SQLite file; `kickside demo` runs on its own "
            "file and prints its URL).",
        ),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            envvar=SCHEMA_ENV,
            show_envvar=True,
            help="PostgreSQL schema for Kickside's tables.",
        ),
    ] = None,
    read_only: Annotated[
        bool,
        typer.Option(
            "--read-only",
            envvar=READ_ONLY_ENV,
            show_envvar=True,
            help="Disable every action (for a read-only role).",
        ),
    ] = False,
    refresh: Annotated[
        float,
        typer.Option(
            "--refresh",
            min=MIN_REFRESH,
            max=MAX_REFRESH,
            metavar="SECONDS",
            help="Seconds between refreshes.",
        ),
    ] = 1.0,
    schedule: Annotated[
        str | None,
        typer.Option(
            "--schedule",
            metavar="MODULE[:ATTRIBUTE]",
            help="The app's cron schedule, for the Cron table (default attribute "
            "SCHEDULE). Without it, the table shows what the running nodes publish.",
        ),
    ] = None,
) -> None:
    """The live Kickside dashboard: queues, jobs, slots, leases, capacity and health.

    The database, schema and read-only switch come from their flags, else their KICKSIDE_*
    variables, else the configuration file (kickside.toml or the tool.kickside table of
    pyproject.toml, as `kickside config` shows), else their defaults."""
    try:
        from kickside_engine.runtime import load_config

        found = load_config(names=["database_url", "schema", "read_only"])
        database_url = database_url if database_url is not None else found.value("database_url")
        schema = schema if schema is not None else found.value("schema")
        read_only = read_only or bool(found.value("read_only"))
        db = connect_database(database_url, schema=schema, create=False)
        entries = load_schedule(schedule) if schedule else []
    except KicksideError as exc:
        typer.echo(f"kickside-tui: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from None
    try:
        adapter = Adapter(db, read_only=read_only, schedule=entries, demo_schedule=not schedule)
        with kickside_logs_off_the_screen():
            KicksideApp(adapter, refresh_seconds=refresh).run()
    finally:
        db.dispose()


def main() -> None:
    """Console-script entry point of ``kickside-tui``."""
    cli()
