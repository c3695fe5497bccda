"""Queues, nodes and cron: pause and resume queues, see every pool and the schedule."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from kickside_engine import JobState
from kickside_engine.control import ExecutorKind, QueueInfo
from kickside_tui.adapter import OpsData
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.format import clock, count, relative, short_id, span
from kickside_tui.widgets.tables import Row, selected_key
from kickside_tui.widgets.view_table import Col, Ordered, ViewTable

QUEUES = (
    Col("queue", "queue"),
    Col("state", "state"),
    Col("since", "since", drop=2),
    Col("by", "by", drop=3),
    Col("concurrency", "concurrency", "conc", drop=1),
    Col("nodes", "nodes", drop=3, flex=True),
    Col("available", "available", "avail"),
    Col("executing", "executing", "exec"),
)
NODES = (
    Col("node", "node"),
    Col("host", "host", drop=3),
    Col("pid", "pid", drop=3),
    Col("code", "code", drop=2),
    Col("executors", "executors busy/slots", "executors"),
    Col("heartbeat", "heartbeat", "beat"),
    Col("queues", "queues", drop=2, flex=True),
    Col("up", "up", drop=3),
)
CRON = (
    Col("entry", "entry"),
    Col("expression", "expression", "expr", drop=2),
    Col("job", "job", drop=2),
    Col("nodes", "nodes", drop=1, flex=True),
    Col("last run", "last run", "last"),
    Col("next run", "next run", "next"),
    Col("last job", "last job", "job id", drop=3),
    Col("problem", "problem", drop=1, flex=True),
)


def executor_cell(kinds: tuple[ExecutorKind, ...]) -> Ordered:
    """``process 3/8, async 120/200``, sorted by busy slots; a kind with no free slot in bold."""
    cell = Text()
    for i, kind in enumerate(kinds):
        if i:
            cell.append(", ")
        cell.append(str(kind), style="bold" if kind.slots and kind.busy >= kind.slots else "")
    return Ordered(cell if kinds else Text("-"), sum(k.busy for k in kinds))


class OpsScreen(ViewScreen):
    """``p`` pauses and ``r`` resumes the queue under the cursor, on every node."""

    VIEW = "ops"
    WRITE_ACTIONS = frozenset({"pause", "resume"})
    BINDINGS = [
        Binding("p", "pause", "Pause queue"),
        Binding("r", "resume", "Resume queue"),
    ]

    def __init__(self, adapter: Any) -> None:
        super().__init__(adapter)
        self.queues: dict[str, QueueInfo] = {}
        #: Each cron entry's last job, for enter (open it) and y (copy its id).
        self.cron_jobs: dict[str, uuid.UUID] = {}

    def _cron_job(self, entry: str) -> uuid.UUID | None:
        return self.cron_jobs.get(entry)

    def compose_body(self) -> ComposeResult:
        with Vertical(id="ops"):
            yield Static("Queues", classes="section")
            yield ViewTable(QUEUES, id="queues", copy_what="queue")
            yield Static("Nodes", classes="section")
            yield ViewTable(NODES, id="nodes", copy_what="node")
            yield Static("Cron", classes="section")
            yield ViewTable(
                CRON,
                id="cron",
                copy_what="last job id",
                job_of=self._cron_job,
                copy_value=lambda key: str(self._cron_job(key) or "") or None,
            )
            yield Static(id="cron-note", classes="status")

    def on_mount(self) -> None:
        self.query_one("#queues", DataTable).focus()

    def fetch(self, now: datetime) -> OpsData:
        return self.adapter.ops(now)

    def show(self, data: Any, now: datetime) -> None:
        assert isinstance(data, OpsData)
        self.queues = {q.name: q for q in data.queues}
        queue_rows: list[Row] = []
        for q in data.queues:
            state = (
                Text("paused", style="bold yellow") if q.paused else Text("running", style="green")
            )
            if q.no_node:
                state = Text("no node", style="bold red") if not q.paused else state
            queue_rows.append(
                (
                    q.name,
                    [
                        Text(q.name, style="bold"),
                        state,
                        Ordered(relative(q.paused_at, now) if q.paused_at else "-", q.paused_at),
                        q.paused_by or "-",
                        Text(str(q.concurrency), justify="right"),
                        ", ".join(n.node for n in q.nodes) or "-",
                        Text(count(q.counts[JobState.AVAILABLE]), justify="right"),
                        Text(count(q.counts[JobState.EXECUTING]), justify="right"),
                    ],
                )
            )
        self.query_one("#queues", ViewTable).fill(queue_rows)
        node_rows: list[Row] = []
        for n in data.nodes:
            beat = Ordered(f"{span(n.heartbeat_age)} ago", n.heartbeat_age)
            if n.stale:
                beat = Ordered(f"stale {span(n.heartbeat_age)}", n.heartbeat_age, style="bold red")
            node_rows.append(
                (
                    n.name,
                    [
                        Text(n.name, style="bold"),
                        n.host,
                        str(n.pid),
                        n.code_version or "-",
                        executor_cell(n.executors),
                        beat,
                        ", ".join(f"{k}:{v}" for k, v in sorted(n.queues.items())),
                        Ordered(span(now - n.started_at), now - n.started_at),
                    ],
                )
            )
        self.query_one("#nodes", ViewTable).fill(node_rows)
        cron_rows: list[Row] = []
        for entry in data.cron:
            cron_rows.append(
                (
                    entry.key,
                    [
                        Text(entry.key, style="bold"),
                        entry.expression
                        + ("" if entry.timezone == "UTC" else f" ({entry.timezone})"),
                        f"{entry.worker} ({entry.queue})" if entry.worker else "-",
                        ", ".join(entry.nodes) or Text("none", style="yellow"),
                        Ordered(
                            f"{clock(entry.last_run)} ({relative(entry.last_run, now)})"
                            if entry.last_run
                            else "never",
                            entry.last_run,
                        ),
                        Ordered(
                            f"{clock(entry.next_run)} ({relative(entry.next_run, now)})"
                            if entry.next_run
                            else "-",
                            entry.next_run,
                        ),
                        short_id(entry.last_job_id) if entry.last_job_id else "-",
                        Text(entry.error or "", style="bold red"),
                    ],
                )
            )
        self.cron_jobs = {e.key: e.last_job_id for e in data.cron if e.last_job_id}
        self.query_one("#cron", ViewTable).fill(cron_rows)
        if data.demo_schedule:
            note = (
                "the demo's cron schedule (kickside demo filled this database); "
                "--schedule module:ATTRIBUTE shows another"
            )
        elif data.published:
            note = "the entries the running nodes publish"
        elif data.schedule_loaded:
            note = ""
        else:
            note = (
                "no running node publishes a cron entry: kickside worker --app MODULE runs "
                "the module's SCHEDULE (--schedule module:ATTRIBUTE shows one here)"
            )
        self.query_one("#cron-note", Static).update(Text(note, style="dim"))

    def _selected(self) -> QueueInfo | None:
        key = selected_key(self.query_one("#queues", DataTable))
        queue = self.queues.get(key) if key else None
        if queue is None:
            self.notify("select a queue first", severity="warning")
        return queue

    def action_pause(self) -> None:
        if (queue := self._selected()) is not None:
            self.act(
                "pause",
                lambda now: f"queue {self.adapter.pause_queue(queue.name, now).name} paused",
                confirm=f"Pause queue {queue.name} on every node?\nRunning jobs finish; "
                "nothing new is claimed until it is resumed.",
            )

    def action_resume(self) -> None:
        if (queue := self._selected()) is not None:
            self.act(
                "resume",
                lambda now: f"queue {self.adapter.resume_queue(queue.name, now).name} resumed",
            )
