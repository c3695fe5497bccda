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
    (
        "Jobs",
        "r retry · c cancel · d discard · w wake · a park · e resume a disabled slot · "
        "b bulk retry/cancel/discard over the filter (a preview first; completed jobs only when "
        'ticked; no filter needs "all"; large sets need the count typed) · capital letters do '
        "nothing (Caps Lock) · n/p next/previous page · / search "
        "(read window by window; esc stops, n continues) · f filter · z or enter zoom the "
        "detail (esc back; the action keys act on the job shown) · enter in a filter applies it",
    ),
    (
        "Slots",
        "w wake (ensure due) · a park · e resume a disabled slot · x purge (clears its "
        "wakes at once; shows the continuation: runs deleted, waiting for lease release; a purge "
        "stopped early shows as pending)",
    ),
    ("Leases", "c cancel · d discard an executing job (its node stops the run)"),
    ("Metrics", "h run the doctor now (it runs on its own every 30s while the view is shown)"),
    ("Queues", "p pause · r resume the queue under the cursor"),
    (
        "A job",
        "enter on any row that is a job (Leases, Slots, Capacity, cron, audit) opens it: "
        "its detail and live log, with r c d w a e; esc goes back",
    ),
    (
        "Tables",
        "j/k or arrows move · s sorts by the first column, again in reverse, then by "
        "the next column, and after the last back to the view's order (a click on a header "
        "sorts by it, again in reverse, a third time the view's order; the Jobs view sorts the "
        "page shown) · / filter the rows (esc clears) · y copy the row's id · narrow terminals "
        "hide the least needed columns first",
    ),
    (
        "Anywhere",
        "1-7 views · : go to a view by name (:leases, :doctor, :job ID) · ctrl+p "
        "command palette (every action of the view) · g refresh now · + / - refresh faster "
        "/ slower · ? this help · q quit · \u2248 marks an estimated count (large history)",
    ),
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
    JobState.WAITING: "workflow job waiting for its upstream jobs to be final",
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
    table.add_row(
        "",
        Text("Destructive actions ask first. --read-only disables every action.", style="italic"),
    )
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

    BINDINGS = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
        Binding("j", "scroll('down')", "Scroll down", show=False),
        Binding("k", "scroll('up')", "Scroll up", show=False),
    ]

    def action_scroll(self, direction: str) -> None:
        scroll = self.query_one(VerticalScroll)
        if direction == "down":
            scroll.scroll_down()
        else:
            scroll.scroll_up()

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(help_text())
