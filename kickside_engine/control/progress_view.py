"""A job's progress as operators see it: redacted, then put in words for a table or a pane."""

from __future__ import annotations

import json

from kickside_engine.models import Job
from kickside_engine.redact import redact_args


def shown_progress(job: Job, *, width: int | None = None) -> str | None:
    """``job``'s progress for display, redacted as its args are; None before any report.

    A fraction reads ``42%``; an object is its compact JSON, led by the percentage when it
    holds a ``fraction`` in [0, 1]. ``width`` cuts the text (with ``…``) for a table cell.
    """
    if job.progress is None:
        return None
    value = redact_args(job.progress, job.meta)
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = _percent(value)
    elif isinstance(value, dict):
        fraction = value.get("fraction")
        lead, rest = None, value
        if isinstance(fraction, int | float) and _is_fraction(fraction):
            lead = _percent(fraction)
            rest = {k: v for k, v in value.items() if k != "fraction"}
        body = json.dumps(rest, ensure_ascii=False, separators=(", ", ": ")) if rest else ""
        text = " ".join(part for part in (lead, body) if part)
    else:
        text = json.dumps(value, ensure_ascii=False)
    if width is not None and len(text) > width:
        text = text[: max(1, width - 1)] + "…"
    return text


def _is_fraction(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def _percent(value: float) -> str:
    return f"{value * 100:.0f}%"
