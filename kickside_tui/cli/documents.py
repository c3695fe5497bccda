"""Engine models as the CLI shows them: JSON-ready dicts, redacted on the way out.

Args and meta are stored as the application gave them and are redacted here, with the
sensitive key names the job's meta records (its worker's declarations); errors are stored
redacted, but older rows may predate a redaction rule, so they go through the one redaction
again (it is idempotent). Lease tokens fence settlements and are never printed.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from kickside_engine import Job, JobError, Run
from kickside_engine.control import declared_sensitive_keys, redact_args, redact_meta, redact_text
from kickside_tui.cli.output import to_jsonable

_HIDDEN = frozenset({"lease_token"})


def error_document(entry: JobError, sensitive_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """One entry of a job's error history (``sensitive_keys``: the job's declared names)."""
    return {
        "attempt": entry.attempt,
        "at": to_jsonable(entry.at),
        "error": redact_text(entry.error, sensitive_keys),
    }


def job_document(job: Job) -> dict[str, Any]:
    """Every field of a job (``lease_token`` left out), with args, meta, errors, the result and
    the progress redacted."""
    doc: dict[str, Any] = {}
    for f in dataclasses.fields(job):
        if f.name in _HIDDEN:
            continue
        doc[f.name] = to_jsonable(getattr(job, f.name))
    declared = declared_sensitive_keys(job.meta)
    doc["args"] = redact_args(job.args, job.meta)
    doc["result"] = redact_args(job.result, job.meta)  # redacted as args are, same names
    doc["progress"] = redact_args(job.progress, job.meta)
    doc["meta"] = redact_meta(job.meta)
    doc["errors"] = [error_document(e, declared) for e in job.errors]
    return doc


def run_document(run: Run, sensitive_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """One execution attempt, its error redacted (``sensitive_keys``: the job's names)."""
    doc = {
        f.name: to_jsonable(getattr(run, f.name))
        for f in dataclasses.fields(run)
        if f.name not in _HIDDEN
    }
    doc["error"] = redact_text(run.error, sensitive_keys) if run.error is not None else None
    doc["settled"] = run.settled
    return doc


def short_time(value: datetime | None) -> str:
    """A UTC time for a table column whose header says UTC: ``2026-01-31 12:00:05``."""
    if value is None:
        return ""
    return value.strftime("%Y-%m-%d %H:%M:%S")


def utc_time(value: datetime | None) -> str:
    """A UTC time in running text, saying so: ``2026-01-31 12:00:05 UTC``."""
    return f"{short_time(value)} UTC" if value is not None else ""


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
