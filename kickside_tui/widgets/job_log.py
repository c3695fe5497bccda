"""A job's log as the engine stored it: the tail the job detail shows, refreshed live.

The pool logs ``job.start``, ``job.stop`` and ``job.exception`` under the ``kickside.job``
logger in its own process, which the dashboard cannot read. What the engine stores is enough to
rebuild those records: one run-history row per attempt (node, code version, start, end,
outcome, duration, the redacted error) and one audit row per operator action on the job. This
module turns them into log lines in time order; the detail pane shows the newest and, since it
reloads with every refresh of its view (and on every commit on PostgreSQL), new lines appear as
attempts start and end. What it cannot show: lines a job logs or prints itself (those stay in
its pool's log), and bulk actions (the audit trail on view 6 lists their ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from kickside_engine import Job, Run, RunOutcome
from kickside_engine.control import AuditEntry
from kickside_tui.widgets.format import clock, first_line, millis

#: Lines shown; older ones are counted, not shown.
TAIL_LINES = 30
LEVEL_STYLES = {"INFO": "", "WARN": "dark_orange", "ERROR": "bold red"}
#: Outcomes the pool logs as ``job.exception`` (a failure, a timeout, a crash).
EXCEPTIONS = frozenset({RunOutcome.FAILED, RunOutcome.TIMEOUT, RunOutcome.CRASHED})


@dataclass(frozen=True)
class LogRecord:
    """One line of a job's log: when, how bad, which event, and what it says."""

    at: datetime
    level: str
    event: str
    message: str


def _start(run: Run) -> LogRecord:
    code = f" ({run.code_version})" if run.code_version else ""
    queued = f", queued {millis(run.queue_ms)}" if run.queue_ms is not None else ""
    return LogRecord(
        run.started_at, "INFO", "job.start", f"attempt {run.attempt} on {run.node}{code}{queued}"
    )


def _end(run: Run, job: Job, sensitive_keys: tuple[str, ...]) -> LogRecord | None:
    if run.finished_at is None or run.outcome is None:
        return None
    took = f" after {millis(run.duration_ms)}" if run.duration_ms is not None else ""
    if run.outcome in EXCEPTIONS:
        final = run.attempt >= job.max_attempts and not job.is_slot
        error = first_line(run.error, 300, sensitive_keys) or run.outcome.value
        return LogRecord(
            run.finished_at,
            "ERROR" if final else "WARN",
            "job.exception",
            f"attempt {run.attempt} {run.outcome.value}{took}: {error}",
        )
    if run.outcome is RunOutcome.RESCUED:
        return LogRecord(
            run.finished_at,
            "WARN",
            "job.rescued",
            f"attempt {run.attempt}: lease on {run.node} expired, rescued",
        )
    return LogRecord(
        run.finished_at, "INFO", "job.stop", f"attempt {run.attempt} {run.outcome.value}{took}"
    )


def _operator(entry: AuditEntry, sensitive_keys: tuple[str, ...]) -> LogRecord:
    details = ", ".join(f"{k}={v}" for k, v in sorted(entry.details.items()))
    said = f" ({first_line(details, 120, sensitive_keys)})" if details else ""
    return LogRecord(
        entry.at, "INFO", f"operator.{entry.action}", f"by {entry.actor}@{entry.host}{said}"
    )


def log_records(
    job: Job,
    runs: Sequence[Run],
    audit: Sequence[AuditEntry],
    *,
    sensitive_keys: tuple[str, ...] = (),
) -> list[LogRecord]:
    """Every record the engine's stored rows give for ``job``, oldest first; errors and
    details redacted, also of the job's declared ``sensitive_keys``."""
    records = [
        LogRecord(job.inserted_at, "INFO", "job.insert", f"{job.worker} on queue {job.queue}")
    ]
    for run in runs:
        records.append(_start(run))
        end = _end(run, job, sensitive_keys)
        if end is not None:
            records.append(end)
    records += [_operator(e, sensitive_keys) for e in audit]
    ended = {run.outcome for run in runs}
    acted = {entry.action for entry in audit}
    for at, outcome, action in (
        (job.cancelled_at, RunOutcome.CANCELLED, "cancel"),
        (job.discarded_at, RunOutcome.DISCARDED, "discard"),
    ):
        if at is not None and outcome not in ended and action not in acted:
            # No run ended so and no single-job action did it: a bulk action, the API, or
            # (discarded) the last attempt's failure.
            records.append(LogRecord(at, "INFO", f"job.{outcome.value}", f"now {job.state.value}"))
    records.sort(key=lambda r: r.at)  # stable: a run's start stays before its end
    return records


def render_log(records: Sequence[LogRecord], *, limit: int = TAIL_LINES) -> RenderableType:
    """The newest ``limit`` records, one a line: time, level, event, message (wrapped)."""
    table = Table(box=None, show_header=False, pad_edge=False, show_edge=False, expand=True)
    table.add_column(no_wrap=True, style="dim")
    table.add_column(no_wrap=True)
    table.add_column(ratio=1, overflow="fold")
    shown = records[-limit:]
    if len(records) > len(shown):
        table.add_row(
            "", "", Text(f"{len(records) - len(shown)} earlier line(s)", style="dim italic")
        )
    for record in shown:
        message = Text()
        message.append(record.event, style="bold")
        message.append(f" {record.message}")
        table.add_row(
            clock(record.at), Text(record.level, style=LEVEL_STYLES[record.level]), message
        )
    return table
