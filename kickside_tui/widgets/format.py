"""Plain-text formatting shared by the views: ages, durations, counts and job states.

Every state is written out in full, so the tables stay readable without colour; the colour only
repeats what the word says.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from rich.text import Text

from kickside_engine import JobState, RunOutcome
from kickside_engine.control import redact_text

#: One style per state; chosen to stay distinct on dark and light themes.
STATE_STYLES: dict[JobState, str] = {
    JobState.SCHEDULED: "cyan",
    JobState.AVAILABLE: "bold blue",
    JobState.EXECUTING: "bold yellow",
    JobState.RETRYABLE: "bold dark_orange",
    JobState.COMPLETED: "green",
    JobState.CANCELLED: "magenta",
    JobState.DISCARDED: "bold red",
    JobState.PARKED: "dim",
    JobState.DISABLED: "dim italic",
    JobState.WAITING: "italic cyan",
}

OUTCOME_STYLES: dict[RunOutcome, str] = {
    RunOutcome.COMPLETED: "green",
    RunOutcome.FAILED: "bold red",
    RunOutcome.SNOOZED: "cyan",
    RunOutcome.CANCELLED: "magenta",
    RunOutcome.DISCARDED: "bold red",
    RunOutcome.TIMEOUT: "bold red",
    RunOutcome.CRASHED: "bold red",
    RunOutcome.RESCUED: "dark_orange",
}


def state_text(state: JobState) -> Text:
    """The state's name, styled with its colour."""
    return Text(state.value, style=STATE_STYLES.get(state, ""))


def outcome_text(outcome: RunOutcome | None) -> Text:
    """A run outcome's name (``running`` while unsettled), styled with its colour."""
    if outcome is None:
        return Text("running", style="bold yellow")
    return Text(outcome.value, style=OUTCOME_STYLES.get(outcome, ""))


def span(delta: timedelta) -> str:
    """A short human span: ``45s``, ``3m05s``, ``2h10m``, ``4d3h``."""
    seconds = int(abs(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def relative(at: datetime | None, now: datetime) -> str:
    """``5s ago`` or ``in 20s`` (``-`` for no time)."""
    if at is None:
        return "-"
    delta = at - now
    if abs(delta) < timedelta(seconds=1):
        return "now"
    return f"in {span(delta)}" if delta > timedelta(0) else f"{span(delta)} ago"


def clock(at: datetime | None) -> str:
    """A UTC time of day, ``14:03:07`` (``-`` for no time)."""
    return at.strftime("%H:%M:%S") if at is not None else "-"


def stamp(at: datetime | None) -> str:
    """A UTC date and time, ``2026-11-30 14:03:07Z`` (``-`` for no time)."""
    return at.strftime("%Y-%m-%d %H:%M:%SZ") if at is not None else "-"


def millis(value: float | int | None) -> str:
    """A duration in milliseconds, humanised: ``340ms``, ``1.2s``, ``3m05s``."""
    if value is None:
        return "-"
    if value < 1000:
        return f"{value:.0f}ms"
    if value < 60_000:
        return f"{value / 1000:.1f}s"
    return span(timedelta(milliseconds=value))


def count(value: int) -> str:
    """A count with thousands separators."""
    return f"{value:,}"


def estimate(value: int) -> str:
    """An estimated count, to two significant digits: ``≈980``, ``≈48k``, ``≈1.2M``."""
    if value < 1000:
        return f"\u2248{value}"
    rounded = round(value, 2 - len(str(value)))
    divisor, suffix = (1_000_000, "M") if rounded >= 1_000_000 else (1_000, "k")
    return f"\u2248{rounded / divisor:g}{suffix}"


def short_id(job_id: uuid.UUID | str) -> str:
    """The last eight hex digits of an id: the random part of a UUIDv7."""
    return str(job_id)[-8:]


def first_line(text: str | None, limit: int = 80, sensitive_keys: tuple[str, ...] = ()) -> str:
    """The first line of ``text``, redacted (with a job's declared ``sensitive_keys``) and cut
    to ``limit`` characters."""
    if not text:
        return ""
    line = redact_text(text, sensitive_keys).strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def pretty_json(value: Any) -> str:
    """JSON-like data, already redacted (``redact_args``, ``redact_meta``), indented for
    reading."""
    return json.dumps(value, indent=2, sort_keys=True, default=str)
