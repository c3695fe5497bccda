"""The only module of the CLI that writes to the terminal.

Human output goes to stdout as Rich tables and text; with ``--json`` stdout carries exactly one
JSON document. Progress, warnings and errors always go to stderr.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)


def to_jsonable(value: Any) -> Any:
    """Convert engine models (dataclasses, enums, UUIDs, datetimes) to JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    return value


def emit_json(document: Any) -> None:
    """Write one JSON document to stdout."""
    sys.stdout.write(json.dumps(to_jsonable(document), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a Rich table to stdout."""
    t = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(col)
    for row in rows:
        t.add_row(*("" if v is None else str(to_jsonable(v)) for v in row))
    stdout.print(t)


def info(message: str) -> None:
    """A line of human output on stdout."""
    stdout.print(message, highlight=False)


def error(message: str) -> None:
    """A one-line error on stderr."""
    stderr.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)


def note(message: str) -> None:
    """Progress or a warning on stderr."""
    stderr.print(message, highlight=False)
