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
from kickside_tui.adapter import MetricsData
from kickside_tui.screens.base import ViewScreen, describe_failure
from kickside_tui.widgets.format import count, first_line, millis, span, stamp
from kickside_tui.widgets.sparks import QueueSparks
from kickside_tui.widgets.tables import Row, refill

#: The doctor runs every this many refreshes, in a worker of its own: it checks the whole
#: database (a second or more at a million jobs), which no refresh should wait for.
HEALTH_EVERY = 15
FINDING_STYLES = {"ok": "green", "warn": "bold dark_orange", "fail": "bold red"}


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
            yield Static("Throughput per queue, per minute over the last 30 minutes",
                         classes="section")
            yield Vertical(id="throughput")
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
        self._show_throughput(data)
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

    def _show_throughput(self, data: MetricsData) -> None:
        box = self.query_one("#throughput", Vertical)
        existing = {w.queue: w for w in box.query(QueueSparks)}
        wanted = [q.queue for q in data.queues]
        for name, widget in existing.items():
            if name not in wanted:
                widget.remove()
        for q in data.queues:
            completed = [float(b.completed) for b in q.buckets]
            failed = [float(b.failed) for b in q.buckets]
            shown = existing.get(q.queue)
            if shown is None:
                box.mount(QueueSparks(q.queue, completed, failed))
            else:
                shown.set_data(completed, failed)
        if not data.queues:
            if not box.query(".empty"):
                box.mount(Static("no runs yet", classes="empty"))
        else:
            box.query(".empty").remove()

    def action_doctor(self) -> None:
        self._health_in = HEALTH_EVERY
        self._run_doctor()


def span_or_dash(seconds: float | None) -> str:
    """A backlog age, or ``-`` without backlog."""
    return "-" if seconds is None else span(timedelta(seconds=seconds))
