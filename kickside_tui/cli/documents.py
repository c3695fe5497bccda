"""Engine models as the CLI shows them: JSON-ready dicts, redacted once more on the way out.

Args and errors are stored redacted, but meta is stored as given and older rows may predate a
redaction rule, so everything that could carry a secret goes through the one redaction again
(it is idempotent). Lease tokens fence outcomes and are never printed.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from kickside_engine import Job, JobError, Run
from kickside_engine.redact import redact_text, redact_value
from kickside_tui.cli.output import to_jsonable

_HIDDEN = frozenset({"lease_token"})


def error_document(entry: JobError) -> dict[str, Any]:
    """One entry of a job's error history."""
    return {
        "attempt": entry.attempt,
        "at": to_jsonable(entry.at),
        "error": redact_text(entry.error),
    }


def job_document(job: Job) -> dict[str, Any]:
    """Every field of a job (``lease_token`` left out), with args, meta and errors redacted."""
    doc: dict[str, Any] = {}
    for f in dataclasses.fields(job):
        if f.name in _HIDDEN:
            continue
        doc[f.name] = to_jsonable(getattr(job, f.name))
    doc["args"] = redact_value(job.args)
    doc["meta"] = redact_value(job.meta)
    doc["errors"] = [error_document(e) for e in job.errors]
    return doc


def run_document(run: Run) -> dict[str, Any]:
    """One execution attempt, its error redacted."""
    doc = {
        f.name: to_jsonable(getattr(run, f.name))
        for f in dataclasses.fields(run)
        if f.name not in _HIDDEN
    }
    doc["error"] = redact_text(run.error) if run.error is not None else None
    doc["settled"] = run.settled
    return doc


def short_time(value: datetime | None) -> str:
    """A UTC time for tables: ``2026-01-31 12:00:05``."""
    if value is None:
        return ""
    return value.strftime("%Y-%m-%d %H:%M:%S")


def seconds(value: timedelta | float | None) -> str:
    """A duration for tables: ``42.1s``, ``12m03s``, ``3h05m``."""
    if value is None:
        return ""
    total = value.total_seconds() if isinstance(value, timedelta) else float(value)
    sign = "-" if total < 0 else ""
    total = abs(total)
    if total < 60:
        return f"{sign}{total:.1f}s"
    minutes, secs = divmod(int(total), 60)
    if minutes < 60:
        return f"{sign}{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{sign}{hours}h{minutes:02d}m"


def first_line(text: str | None, limit: int = 120) -> str:
    """The first line of a (redacted) message, cut for a table cell."""
    if not text:
        return ""
    line = redact_text(text).strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
