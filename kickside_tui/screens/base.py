"""What every view shares: the frame, loading off the event loop, and running actions.

A view fetches its data in a thread worker (:meth:`ViewScreen.fetch`, through the adapter) and
posts :class:`DataLoaded` or :class:`LoadFailed` back; only :meth:`ViewScreen.show` touches
widgets. A load never overlaps the previous one, so a slow or unreachable database cannot pile
up threads. Actions run in workers as well, after a confirmation when they destroy something.

Views never import the app: messages go up, attributes come down. A view posts
:class:`ViewLoaded` or :class:`ViewLoadFailed` up; the app, which holds the retry schedule
(:class:`~kickside_tui.reconnect.Reconnect`, handed down to each view as ``reconnect``), backs
off after a failure and then has the view show the problem in a banner that counts down to the
next try (:meth:`ViewScreen.set_problem`); the first load that works clears both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from textual import work
from textual.app import ComposeResult, SystemCommand
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Header

from kickside_engine import DatabaseUnavailableError, KicksideError
from kickside_tui.adapter import Adapter
from kickside_tui.reconnect import Reconnect
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.widgets.chrome import Banner, ViewBar
from kickside_tui.widgets.footer import Footer


@dataclass
class DataLoaded(Message):
    """A view's data arrived from the database."""

    data: Any
    now: datetime


@dataclass
class LoadFailed(Message):
    """A view's data could not be read; ``message`` says why."""

    message: str
    unavailable: bool


@dataclass
class ViewLoaded(Message):
    """Posted up to the app: ``view`` loaded its data (the database answers)."""

    view: ViewScreen


@dataclass
class ViewLoadFailed(Message):
    """Posted up to the app: ``view`` could not load; ``problem`` is (headline, detail)."""

    view: ViewScreen
    problem: tuple[str, str]


@dataclass
class ActionFinished(Message):
    """An action ran: ``ok`` False when the engine refused it (``message`` says why)."""

    message: str
    ok: bool


def describe_failure(exc: BaseException) -> str:
    """One line about an exception, for the banner or a notification."""
    text = str(exc).strip().splitlines()
    detail = text[0] if text else type(exc).__name__
    return detail if isinstance(exc, KicksideError) else f"{type(exc).__name__}: {detail}"


def describe_retry(seconds: float) -> str:
    """When the next try comes, for the banner: ``retrying now`` once it is due."""
    if seconds <= 0.05:
        return "retrying now"
    return f"next retry in {seconds:.1f}s" if seconds < 10 else f"next retry in {seconds:.0f}s"


class ViewScreen(Screen[None]):
    """A dashboard view: subclasses compose the body, fetch data and show it."""

    VIEW: ClassVar[str] = ""
    #: Actions that change something: disabled (and dimmed in the footer) when read-only.
    WRITE_ACTIONS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, adapter: Adapter) -> None:
        super().__init__()
        self.adapter = adapter
        self._loading = False
        self._again = False
        self.loaded = 0
        #: What the banner says is wrong, as (headline, detail); None while all is well.
        self.problem: tuple[str, str] | None = None
        self._countdown: Timer | None = None
        #: The retry schedule the banner counts down to: the app hands down its own.
        self.reconnect = Reconnect()

    def compose(self) -> ComposeResult:
        yield Header()
        yield ViewBar(self.VIEW, read_only=self.adapter.read_only)
        yield Banner(id="banner")
        yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        """The view's own widgets."""
        yield from ()

    def fetch(self, now: datetime) -> Any:
        """Read the view's data through the adapter (runs in a worker thread)."""
        return None

    def show(self, data: Any, now: datetime) -> None:
        """Render freshly loaded data (runs on the event loop)."""

    def palette_commands(self) -> Iterable[SystemCommand]:
        """This view's entries in the command palette."""
        yield from ()

    # --- loading ---------------------------------------------------------------------------

    @property
    def fetching(self) -> bool:
        """Whether a load of this view's data is in flight."""
        return self._loading

    def on_screen_resume(self) -> None:
        if self.problem is not None:
            self._start_countdown()
        self.reload()

    def on_screen_suspend(self) -> None:
        self._stop_countdown()  # a hidden banner needs no countdown; resuming reloads anyway

    def auto_reload(self) -> None:
        """A refresh nobody asked for (the timer, a notification); views may skip costly ones."""
        self.reload()

    def reload(self) -> None:
        """Load the view's data now, or right after the load in flight."""
        if self._loading:
            self._again = True
            return
        self._loading = True
        self._load()

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        now = self.adapter.now()
        try:
            data = self.fetch(now)
        except DatabaseUnavailableError as exc:
            self.post_message(LoadFailed(describe_failure(exc), unavailable=True))
        except Exception as exc:  # the dashboard must outlive any database trouble
            problem = None
            try:
                problem = self.adapter.schema_problem()
            except Exception:
                problem = None
            self.post_message(LoadFailed(problem or describe_failure(exc), unavailable=False))
        else:
            self.post_message(DataLoaded(data, now))

    def on_data_loaded(self, message: DataLoaded) -> None:
        message.stop()
        self.post_message(ViewLoaded(self))  # the app clears the banner (set_problem)
        self._finished_loading()
        self.loaded += 1
        self.show(message.data, message.now)

    def on_load_failed(self, message: LoadFailed) -> None:
        message.stop()
        what = "DATABASE UNAVAILABLE" if message.unavailable else "CANNOT READ THE DATABASE"
        self.post_message(ViewLoadFailed(self, (what, message.message)))
        self._finished_loading()

    def set_problem(self, problem: tuple[str, str] | None) -> None:
        """Show ``problem`` (headline, detail) in the banner, counting down; None clears it.

        The app calls it once it has recorded the load in its retry schedule, so the countdown
        never shows a schedule that does not know of the failure yet.
        """
        self.problem = problem
        if not self.is_attached:  # a view closed meanwhile (a job's detail) has no banner
            return
        if problem is None:
            self._stop_countdown()
            self.query_one(Banner).show_problem(None)
        else:
            self._start_countdown()

    def _show_problem(self) -> None:
        if self.problem is None:
            return
        what, detail = self.problem
        retry = describe_retry(self.reconnect.remaining())
        # The countdown before the detail, which can be long enough to wrap off a narrow screen.
        self.query_one(Banner).show_problem(f"{what} ({retry}): {detail}")

    def _start_countdown(self) -> None:
        self._show_problem()
        if self._countdown is None:
            self._countdown = self.set_interval(0.5, self._show_problem)

    def _stop_countdown(self) -> None:
        if self._countdown is not None:
            self._countdown.stop()
            self._countdown = None

    def _finished_loading(self) -> None:
        self._loading = False
        if self._again:
            self._again = False
            self.reload()

    # --- actions ---------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.adapter.read_only and action in self.WRITE_ACTIONS:
            return None
        return True

    def act(
        self, label: str, call: Callable[[datetime], str], *, confirm: str | None = None
    ) -> None:
        """Run ``call(now)`` in a worker, after asking ``confirm`` when given."""
        if self.adapter.read_only:
            self.notify(f"read-only dashboard: {label} is disabled", severity="warning")
            return
        if confirm is None:
            self._act(label, call)
            return

        def decided(answer: bool | None) -> None:
            if answer:
                self._act(label, call)

        self.app.push_screen(ConfirmScreen(confirm, verb=label.capitalize()), decided)

    @work(thread=True, group="action")
    def _act(self, label: str, call: Callable[[datetime], str]) -> None:
        try:
            message = call(self.adapter.now())
        except KicksideError as exc:
            self.post_message(ActionFinished(f"{label} refused: {exc}", ok=False))
        except Exception as exc:  # reported, never fatal
            self.post_message(ActionFinished(f"{label} failed: {describe_failure(exc)}", False))
        else:
            self.post_message(ActionFinished(message, ok=True))

    def on_action_finished(self, message: ActionFinished) -> None:
        message.stop()
        self.notify(
            message.message,
            title="done" if message.ok else "not done",
            severity="information" if message.ok else "error",
        )
        self.reload()
