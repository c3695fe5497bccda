"""Overview: every queue's counts by state, throughput, nodes, and what needs attention."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from kickside_engine import JobState
from kickside_tui.adapter import RATE_BUCKET, RATE_WINDOW, OverviewData
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.format import STATE_STYLES, clock, count, estimate
from kickside_tui.widgets.sparks import Series, SeriesPlot
from kickside_tui.widgets.view_table import Col, ViewTable

#: The states the queue table shows, in the order a job usually moves through them.
COLUMNS = (
    JobState.AVAILABLE,
    JobState.SCHEDULED,
    JobState.WAITING,
    JobState.EXECUTING,
    JobState.RETRYABLE,
    JobState.COMPLETED,
    JobState.DISCARDED,
    JobState.CANCELLED,
    JobState.PARKED,
    JobState.DISABLED,
)

#: Labels for narrow terminals; the states an operator watches most stay when columns go.
SHORT = {
    JobState.AVAILABLE: ("avail", 0),
    JobState.SCHEDULED: ("sched", 2),
    JobState.WAITING: ("wait", 3),
    JobState.EXECUTING: ("exec", 0),
    JobState.RETRYABLE: ("retry", 0),
    JobState.COMPLETED: ("compl", 0),
    JobState.DISCARDED: ("disc", 0),
    JobState.CANCELLED: ("canc", 2),
    JobState.PARKED: ("park", 3),
    JobState.DISABLED: ("disab", 3),
}
TABLE = (
    Col("queue", "queue"),
    Col("paused", "paused", "pause", drop=2),
    Col("conc", "conc", drop=3),
    *(Col(state.value, state.value, SHORT[state][0], drop=SHORT[state][1]) for state in COLUMNS),
)


def _cell(value: int, state: JobState, approximate: frozenset[JobState]) -> Text:
    shown = estimate(value) if state in approximate else count(value)
    return Text(shown, style=STATE_STYLES[state] if value else "dim", justify="right")


class OverviewScreen(ViewScreen):
    """Per queue: counts, paused, concurrency; sparklines; nodes; stuck work."""

    VIEW = "overview"

    def compose_body(self) -> ComposeResult:
        with Vertical(id="overview"):
            yield Static(id="summary", classes="summary")
            yield Static(RATES_LEGEND, classes="legend")
            yield SeriesPlot(id="rates", title_width=0, figure_width=10)
            yield ViewTable(TABLE, id="queues", copy_what="queue")
            yield Static(id="attention", classes="attention")

    def fetch(self, now: datetime) -> OverviewData:
        return self.adapter.overview(now)

    def show(self, data: Any, now: datetime) -> None:
        assert isinstance(data, OverviewData)
        s = data.summary
        summary = Text(no_wrap=False)
        summary.append(f"at {clock(now)}Z  ", style="dim")
        summary.append(f"nodes {s.nodes_alive} alive", style="bold")
        if s.nodes_stale:
            summary.append(f", {s.nodes_stale} stale", style="bold dark_orange")
        summary.append("  last minute: ")
        summary.append(f"{s.completed_last_minute} completed", style="green")
        summary.append(", ")
        failed_style = "red" if s.failed_last_minute else ""
        summary.append(f"{s.failed_last_minute} failed", style=failed_style)
        summary.append("  jobs: ")
        summary.append(
            " ".join(
                f"{count(s.totals[state])} {state.value}"
                for state in (JobState.AVAILABLE, JobState.EXECUTING, JobState.RETRYABLE)
            )
        )
        if any(q.approximate for q in data.queues):
            summary.append("  \u2248 estimated from a sample", style="dim italic")
        self.query_one("#summary", Static).update(summary)
        self.query_one("#rates", SeriesPlot).set_series(rates(data))
        rows = []
        for q in data.queues:
            name = Text(q.name, style="bold")
            if q.no_node:
                name.append(" (no node)", style="red")
            rows.append(
                (
                    q.name,
                    [
                        name,
                        Text("paused", style="bold yellow")
                        if q.paused
                        else Text("no", style="dim"),
                        Text(str(q.concurrency) if q.has_node else "-", justify="right"),
                        *(_cell(q.counts[state], state, q.approximate) for state in COLUMNS),
                    ],
                )
            )
        self.query_one("#queues", ViewTable).fill(rows)
        self.query_one("#attention", Static).update(self._attention(data))

    @staticmethod
    def _attention(data: OverviewData) -> Text:
        s = data.summary
        items: list[tuple[str, str]] = []
        if s.expired_leases:
            items.append((f"{s.expired_leases} expired lease(s) not yet rescued", "bold red"))
        if data.waiting_on_admission:
            items.append(
                (f"{data.waiting_on_admission} job(s) waiting on capacity admission", "dark_orange")
            )
        if s.queues_without_node:
            items.append(("no node runs queue(s): " + ", ".join(s.queues_without_node), "bold red"))
        if s.paused_queues:
            items.append(("paused: " + ", ".join(s.paused_queues), "yellow"))
        for g in data.near_limit:
            limit = "?" if g.global_limit is None else str(g.global_limit)
            why = f" ({g.problem})" if g.problem else ""
            items.append(
                (
                    f"capacity group {g.group} near its limit: {g.executing}/{limit}"
                    f" executing, {g.waiting} waiting{why}",
                    "dark_orange",
                )
            )
        text = Text("Attention: ", style="bold")
        if not items:
            text.append("nothing stuck", style="green")
            return text
        for i, (line, style) in enumerate(items):
            text.append(("\n  • " if i or len(items) > 1 else "") + line, style=style)
        return text


def rates(data: OverviewData) -> list[Series]:
    """Completed and failed runs per second, each with its highest rate (the full bar)."""
    return [
        Series(label, tuple(values), f"max {per_second(max(values, default=0.0))}", tone)
        for label, values, tone in (
            ("completed/s", data.completed_per_second, "ok"),
            ("failed/s", data.failed_per_second, "bad"),
        )
    ]


def per_second(rate: float) -> str:
    """A rate, with a decimal below ten a second: ``0.2/s``, ``14/s``."""
    return f"{rate:.1f}/s" if rate < 10 else f"{rate:,.0f}/s"


#: Said under the Overview's rates: how much time a bar covers.
RATES_LEGEND = (
    f"runs per second over the last {RATE_WINDOW.total_seconds() / 60:.0f} minutes,"
    f" a bar per {RATE_BUCKET.total_seconds():.0f}s"
)
