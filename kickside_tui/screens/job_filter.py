"""The Jobs view's filter inputs: parsed into a JobFilter, and described in one line."""

from __future__ import annotations

import re
from typing import Any

from kickside_engine.control import JobFilter

FILTER_FIELDS = ("state", "queue", "worker", "tag", "search")
_SPLIT = re.compile(r"[,\s]+")


def parse_filter(values: dict[str, str]) -> JobFilter:
    """The filter the inputs describe: comma-separated states/queues/workers/tags, free text.

    Raises :class:`InvalidArgumentError` naming a bad value (an unknown state, say).
    """

    def names(field: str) -> tuple[str, ...]:
        return tuple(p for p in _SPLIT.split(values.get(field, "").strip()) if p)

    search = values.get("search", "").strip()
    states: Any = tuple(s.lower() for s in names("state"))  # JobFilter validates the names
    return JobFilter(
        states=states,
        queues=names("queue"),
        workers=names("worker"),
        tags=names("tag"),
        search=search or None,
    )


def describe_filter(flt: JobFilter) -> str:
    """The filter as ``state=retryable queue=mailers`` (``every job`` when empty)."""
    parts = [f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in flt.as_dict().items()]
    return " ".join(parts) if parts else "every job"
