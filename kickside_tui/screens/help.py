"""The help screen: views, keys, and what the state colours mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from kickside_engine import JobState
from kickside_tui.widgets.chrome import VIEWS
from kickside_tui.widgets.format import state_text

ACTIONS = (
    ("Jobs", "r retry · c cancel · d discard · w wake · k park · e resume a disabled slot · "
     "b bulk retry/cancel/discard over the filter (a preview first; completed jobs only when "
     "ticked; no filter needs \"all\"; large sets need the count typed) · capital letters do "
     "nothing (Caps Lock) · n/p next/previous page · / search "
     "(read window by window; esc stops, n continues) · f filter · z zoom the detail · "
     "enter in a filter applies it"),
    ("Slots", "w wake (ensure due) · k park · e resume a disabled slot · x purge (clears its "
     "wakes at once; shows the continuation: runs deleted, waiting for lease release; a purge "
     "stopped early shows as pending)"),
    ("Leases", "c cancel · d discard an executing job (its node stops the run)"),
    ("Metrics", "h run the doctor again"),
    ("Queues", "p pause · r resume the queue under the cursor"),
    ("Anywhere", "1-7 views · ctrl+p command palette · g refresh now · + / - refresh faster "
     "/ slower · ? this help · q quit · \u2248 marks an estimated count (large history)"),
)

MEANINGS = {
    JobState.SCHEDULED: "waits for its time",
    JobState.AVAILABLE: "runnable now, waiting for an executor",
    JobState.EXECUTING: "holds a lease on a node",
    JobState.RETRYABLE: "failed, waits for its backoff",
    JobState.COMPLETED: "finished successfully",
    JobState.CANCELLED: "stopped on purpose",
    JobState.DISCARDED: "gave up (attempts exhausted or bad input)",
    JobState.PARKED: "slot resting until its next demand",
    JobState.DISABLED: "slot taken out of service",
}


def help_text() -> Table:
    """Every view, action key and state, as one table."""
    table = Table(box=None, show_header=False, pad_edge=False, expand=True)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(ratio=1)
    table.add_row(Text("Views", style="bold underline"), "")
    for _, key, label in VIEWS:
        table.add_row(key, label)
    table.add_row("", "")
    table.add_row(Text("Actions", style="bold underline"), "")
    for where, keys in ACTIONS:
        table.add_row(where, keys)
    table.add_row("", "")
    table.add_row(Text("States", style="bold underline"), "")
    for state, meaning in MEANINGS.items():
        table.add_row(state_text(state), meaning)
    table.add_row("", "")
    table.add_row("", Text("Destructive actions ask first. --read-only disables every action.",
                           style="italic"))
    return table


class HelpScreen(ModalScreen[None]):
    """Press escape, q or ? to close."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 90;
        max-width: 98%;
        height: 90%;
        padding: 0 1;
        border: thick $primary;
        background: $surface;
    }
    """

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(help_text())
