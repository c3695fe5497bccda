"""Metrics & health: throughput and latency per queue, the doctor, and the audit trail."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Static

from kickside_engine.control import HealthReport, QueueMetrics
from kickside_tui.adapter import SPARK_BUCKET, SPARK_WINDOW, MetricsData
from kickside_tui.screens.base import ViewScreen, describe_failure
from kickside_tui.widgets.format import count, first_line, millis, relative, span, stamp
from kickside_tui.widgets.sparks import GAP, ZERO, Series, SeriesPlot
from kickside_tui.widgets.tables import Row
from kickside_tui.widgets.view_table import Col, ViewTable, job_key

LATENCY = (
    Col("queue", "queue"),
    Col("queue time", "queue time", "queued"),
    Col("run time", "run time", "run"),
    Col("runs", "runs", drop=2),
    Col("backlog", "backlog", drop=1),
    Col("oldest", "oldest", drop=1),
)
AUDIT = (
    Col("at", "at"),
    Col("who", "who", drop=1),
    Col("action", "action"),
    Col("target", "target", drop=2, flex=True),
    Col("details", "details", drop=3, flex=True),
)

#: The doctor runs on its own this often while the view is shown (and at once when the view
#: comes back after that long), in a worker of its own: it checks the whole database (a second
#: or more at a million jobs), which no refresh waits for. A slow doctor runs less often.
DOCTOR_EVERY = timedelta(seconds=30)
DOCTOR_SLOWDOWN = 20
#: The doctor's run time is shown once it reaches this many seconds (a quick one says nothing).
SHOW_DOCTOR_TIME_FROM_S = 1.0
FINDING_STYLES = {"ok": "green", "warn": "bold dark_orange", "fail": "bold red"}
PLOTS_TITLE = (
    f"Per queue over the last {SPARK_WINDOW.total_seconds() / 60:.0f} minutes,"
    f" a bar per {SPARK_BUCKET.total_seconds() / 60:.0f} minute"
)
PLOTS_LEGEND = f"{ZERO} zero, {GAP} no data; beside: window totals, p95s; backlog age (jobs) now"


def _pct(values: tuple[float | None, float | None, float | None]) -> str:
    return " / ".join(millis(v) for v in values)


@dataclass
class HealthChecked(Message):
    """The doctor finished: its report (or why it could not run), when it started, how long
    it took."""

    report: HealthReport | None
    problem: str = ""
    at: datetime | None = None
    took_s: float = 0.0


@dataclass(frozen=True)
class DoctorRun:
    """When the doctor last ran (the dashboard's clock), how long it took, and whether it
    is running again now."""

    at: datetime | None
    took_s: float
    running: bool

    def interval(self) -> timedelta:
        """How long the report stays fresh: :data:`DOCTOR_EVERY`, longer for a slow doctor."""
        return max(DOCTOR_EVERY, timedelta(seconds=self.took_s * DOCTOR_SLOWDOWN))

    def due(self, now: datetime) -> bool:
        return not self.running and (self.at is None or now - self.at >= self.interval())


def render_doctor_status(run: DoctorRun, now: datetime) -> Text:
    """When the findings below are from, and when they are checked again."""
    text = Text(no_wrap=False)
    if run.at is None:
        text.append("running the doctor…" if run.running else "the doctor has not run yet")
        return text
    text.append(f"checked at {stamp(run.at)} ({relative(run.at, now)})", style="bold")
    if run.took_s >= SHOW_DOCTOR_TIME_FROM_S:
        text.append(f", took {run.took_s:.1f}s")
    if run.running:
        text.append(" · running again…", style="italic")
    else:
        left = run.at + run.interval() - now
        text.append(
            f" · again in {span(max(left, timedelta(0)))}"
            if left > timedelta(0)
            else " · again now"
        )
    text.append(" · h runs it now", style="dim")
    return text


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
        self.doctor = DoctorRun(None, 0.0, running=False)
        self.health: HealthReport | None = None
        self.health_problem = ""
        self.audit_targets: dict[str, str] = {}

    def compose_body(self) -> ComposeResult:
        with VerticalScroll(id="metrics"):
            yield Static(PLOTS_TITLE, classes="section")
            yield Static(PLOTS_LEGEND, classes="legend")
            yield Vertical(id="plots")
            yield Static("Latency and backlog (p50 / p95 / p99)", classes="section")
            yield ViewTable(LATENCY, id="latency", copy_what="queue", zebra_stripes=False)
            yield Static("Doctor", classes="section")
            yield Static(id="doctor-status", classes="legend")
            yield Static(id="doctor")
            yield Static("Audit trail (newest first)", classes="section")
            yield ViewTable(
                AUDIT,
                id="audit",
                copy_what="target",
                copy_value=self._target,
                job_of=lambda key: job_key(self._target(key) or ""),
            )

    def fetch(self, now: datetime) -> MetricsData:
        return self.adapter.metrics(now)

    def _target(self, key: str) -> str | None:
        return self.audit_targets.get(key)

    def _start_doctor(self) -> None:
        self.doctor = replace(self.doctor, running=True)
        self._run_doctor()

    @work(thread=True, exclusive=True, group="doctor")
    def _run_doctor(self) -> None:
        at, started = self.adapter.now(), time.monotonic()
        try:
            report = self.adapter.health(at)
        except Exception as exc:  # shown in its section; the view keeps refreshing
            took = time.monotonic() - started
            self.post_message(HealthChecked(None, describe_failure(exc), at, took))
        else:
            self.post_message(HealthChecked(report, "", at, time.monotonic() - started))

    def on_health_checked(self, message: HealthChecked) -> None:
        message.stop()
        self.health, self.health_problem = message.report, message.problem
        self.doctor = DoctorRun(message.at, message.took_s, running=False)
        self.query_one("#doctor", Static).update(render_health(self.health, self.health_problem))
        self._show_doctor_status(self.adapter.now())

    def _show_doctor_status(self, now: datetime) -> None:
        self.query_one("#doctor-status", Static).update(render_doctor_status(self.doctor, now))

    def show(self, data: Any, now: datetime) -> None:
        assert isinstance(data, MetricsData)
        if self.doctor.due(now):
            self._start_doctor()
        self._show_doctor_status(now)
        self._show_plots(data)
        rows: list[Row] = []
        for q in data.queues:
            rows.append(
                (
                    q.queue,
                    [
                        Text(q.queue, style="bold"),
                        _pct((q.queue_time.p50, q.queue_time.p95, q.queue_time.p99)),
                        _pct((q.run_time.p50, q.run_time.p95, q.run_time.p99)),
                        Text(count(q.run_time.samples), justify="right"),
                        Text(count(q.backlog), justify="right"),
                        span_or_dash(q.backlog_age_seconds),
                    ],
                )
            )
        self.query_one("#latency", ViewTable).fill(rows)
        self.query_one("#doctor", Static).update(render_health(self.health, self.health_problem))
        audit_rows: list[Row] = []
        self.audit_targets = {str(entry.id): entry.target for entry in data.audit}
        for entry in data.audit:
            details = ", ".join(f"{k}={v}" for k, v in sorted(entry.details.items()))
            audit_rows.append(
                (
                    str(entry.id),
                    [
                        stamp(entry.at),
                        f"{entry.actor}@{entry.host}",
                        Text(entry.action, style="bold"),
                        first_line(entry.target, 40),
                        first_line(details, 80),
                    ],
                )
            )
        self.query_one("#audit", ViewTable).fill(audit_rows)

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
        if self.doctor.running:
            self.notify("the doctor is running already")
            return
        self._start_doctor()
        self._show_doctor_status(self.adapter.now())


def queue_series(q: QueueMetrics) -> list[Series]:
    """A queue's rows: completed and failed runs, p95 queue and run time, backlog age."""
    b = q.buckets
    backlog = "none"
    if q.backlog:
        backlog = f"{span_or_dash(q.backlog_age_seconds)} ({count(q.backlog)})"
    return [
        Series(
            "completed",
            tuple(float(x.completed) for x in b),
            count(sum(x.completed for x in b)),
            "ok",
        ),
        Series("failed", tuple(float(x.failed) for x in b), count(sum(x.failed for x in b)), "bad"),
        Series("p95 queue", tuple(x.queue_p95_ms for x in b), millis(q.queue_time.p95), "time"),
        Series("p95 run", tuple(x.run_p95_ms for x in b), millis(q.run_time.p95), "time"),
        Series("backlog age", tuple(x.backlog_age_seconds for x in b), backlog, "age"),
    ]


def span_or_dash(seconds: float | None) -> str:
    """A backlog age, or ``-`` without backlog."""
    return "-" if seconds is None else span(timedelta(seconds=seconds))
