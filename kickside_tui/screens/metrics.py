"""Metrics & health: throughput and latency per queue, the doctor, and the audit trail."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Static

from kickside_engine.health import HealthReport
from kickside_engine.metrics import QueueMetrics
from kickside_tui.adapter import SPARK_BUCKET, SPARK_WINDOW, MetricsData
from kickside_tui.screens.base import ViewScreen, describe_failure
from kickside_tui.widgets.format import count, first_line, millis, span, stamp
from kickside_tui.widgets.sparks import GAP, ZERO, Series, SeriesPlot
from kickside_tui.widgets.tables import Row, refill

#: The doctor runs every this many refreshes, in a worker of its own: it checks the whole
#: database (a second or more at a million jobs), which no refresh should wait for.
HEALTH_EVERY = 15
FINDING_STYLES = {"ok": "green", "warn": "bold dark_orange", "fail": "bold red"}
PLOTS_TITLE = (
    f"Per queue over the last {SPARK_WINDOW.total_seconds() / 60:.0f} minutes,"
    f" a bar per {SPARK_BUCKET.total_seconds() / 60:.0f} minute"
)
PLOTS_LEGEND = (
    f"{ZERO} zero, {GAP} no data; beside: window totals, p95s; backlog age (jobs) now"
)


def _pct(values: tuple[float | None, float | None, float | None]) -> str:
    return " / ".join(millis(v) for v in values)


@dataclass
class HealthChecked(Message):
    """The doctor finished: its report, or why it could not run."""

    report: HealthReport | None
    problem: str = ""


def render_health(report: HealthReport | None, problem: str = "") -> Text:
    """The doctor's findings, one line each, with ok / warn / fail written out."""
    if problem:
        return Text(f"the doctor could not run: {problem}", style="bold red")
    if report is None:
        return Text("running the doctor…", style="dim")
    text = Text()
    for i, finding in enumerate(report.findings):
        if i:
            text.append("\n")
        text.append(f"{finding.status:<4}", style=FINDING_STYLES.get(finding.status, ""))
        text.append(f" {finding.check:<9} ", style="bold")
        text.append(first_line(finding.message, 160))
    return text


class MetricsScreen(ViewScreen):
    """Plots and numbers per queue; ``h`` runs the doctor again."""

    VIEW = "metrics"
    BINDINGS = [Binding("h", "doctor", "Run doctor")]

    def __init__(self, adapter: Any) -> None:
        super().__init__(adapter)
        self._health_in = 0
        self.health: HealthReport | None = None
        self.health_problem = ""

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="metrics"):
            yield Static(PLOTS_TITLE, classes="section")
            yield Static(PLOTS_LEGEND, classes="legend")
            yield Vertical(id="plots")
            yield Static("Latency and backlog (p50 / p95 / p99)", classes="section")
            latency: DataTable[Any] = DataTable(id="latency", cursor_type="row")
            for column in ("queue", "queue time", "run time", "runs", "backlog", "oldest"):
                latency.add_column(column, key=column)
            yield latency
            yield Static("Doctor", classes="section")
            yield Static(id="doctor")
            yield Static("Audit trail (newest first)", classes="section")
            audit: DataTable[Any] = DataTable(id="audit", cursor_type="row", zebra_stripes=True)
            for column in ("at", "who", "action", "target", "details"):
                audit.add_column(column, key=column)
            yield audit

    def fetch(self, now: datetime) -> MetricsData:
        return self.adapter.metrics(now)

    @work(thread=True, exclusive=True, group="doctor")
    def _run_doctor(self) -> None:
        try:
            report = self.adapter.health(self.adapter.now())
        except Exception as exc:  # shown in its section; the view keeps refreshing
            self.post_message(HealthChecked(None, describe_failure(exc)))
        else:
            self.post_message(HealthChecked(report))

    def on_health_checked(self, message: HealthChecked) -> None:
        message.stop()
        self.health, self.health_problem = message.report, message.problem
        self.query_one("#doctor", Static).update(render_health(self.health, self.health_problem))

    def show(self, data: Any, now: datetime) -> None:
        assert isinstance(data, MetricsData)
        if self._health_in <= 0:
            self._health_in = HEALTH_EVERY
            self._run_doctor()
        self._health_in -= 1
        self._show_plots(data)
        rows: list[Row] = []
        for q in data.queues:
            rows.append((
                q.queue,
                [
                    Text(q.queue, style="bold"),
                    _pct((q.queue_time.p50, q.queue_time.p95, q.queue_time.p99)),
                    _pct((q.run_time.p50, q.run_time.p95, q.run_time.p99)),
                    Text(count(q.run_time.samples), justify="right"),
                    Text(count(q.backlog), justify="right"),
                    span_or_dash(q.backlog_age_seconds),
                ],
            ))
        refill(self.query_one("#latency", DataTable), rows)
        self.query_one("#doctor", Static).update(render_health(self.health, self.health_problem))
        audit_rows: list[Row] = []
        for entry in data.audit:
            details = ", ".join(f"{k}={v}" for k, v in sorted(entry.details.items()))
            audit_rows.append((
                str(entry.id),
                [stamp(entry.at), f"{entry.actor}@{entry.host}", Text(entry.action, style="bold"),
                 first_line(entry.target, 40), first_line(details, 80)],
            ))
        refill(self.query_one("#audit", DataTable), audit_rows)

    def _show_plots(self, data: MetricsData) -> None:
        box = self.query_one("#plots", Vertical)
        existing = {w.title: w for w in box.query(SeriesPlot)}
        wanted = [q.queue for q in data.queues]
        for name, widget in existing.items():
            if name not in wanted:
                widget.remove()
        kept = [w for name, w in existing.items() if name in wanted]
        for q in data.queues:
            shown = existing.get(q.queue)
            if shown is not None:
                shown.set_series(queue_series(q))
                continue
            plot = SeriesPlot(q.queue, queue_series(q), classes="queue-plot")
            after = next((w for w in kept if w.title > q.queue), None)  # queues stay sorted
            if after is None:
                box.mount(plot)
            else:
                box.mount(plot, before=after)
        if not data.queues:
            if not box.query(".empty"):
                box.mount(Static("no runs yet", classes="empty"))
        else:
            box.query(".empty").remove()

    def action_doctor(self) -> None:
        self._health_in = HEALTH_EVERY
        self._run_doctor()


def queue_series(q: QueueMetrics) -> list[Series]:
    """A queue's rows: completed and failed runs, p95 queue and run time, backlog age."""
    b = q.buckets
    backlog = "none"
    if q.backlog:
        backlog = f"{span_or_dash(q.backlog_age_seconds)} ({count(q.backlog)})"
    return [
        Series("completed", tuple(float(x.completed) for x in b),
               count(sum(x.completed for x in b)), "ok"),
        Series("failed", tuple(float(x.failed) for x in b), count(sum(x.failed for x in b)), "bad"),
        Series("p95 queue", tuple(x.queue_p95_ms for x in b), millis(q.queue_time.p95), "time"),
        Series("p95 run", tuple(x.run_p95_ms for x in b), millis(q.run_time.p95), "time"),
        Series("backlog age", tuple(x.backlog_age_seconds for x in b), backlog, "age"),
    ]


def span_or_dash(seconds: float | None) -> str:
    """A backlog age, or ``-`` without backlog."""
    return "-" if seconds is None else span(timedelta(seconds=seconds))
