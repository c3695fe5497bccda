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
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)

#: Width for tables written to a pipe or file: rows stay whole lines (greppable), not folded.
PIPE_WIDTH = 250


def _print_table(t: Table) -> None:
    if stdout.is_terminal:
        stdout.print(t)
    else:
        Console(file=sys.stdout, width=PIPE_WIDTH, soft_wrap=True).print(t)


def to_jsonable(value: Any) -> Any:
    """Convert engine models (dataclasses, enums, UUIDs, datetimes) to JSON-ready values.

    A ``timedelta`` becomes a number of seconds.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, timedelta):
        return value.total_seconds()
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


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return json.dumps(to_jsonable(value), ensure_ascii=False)
    return str(to_jsonable(value))


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Print a Rich table to stdout; long values fold onto more lines, never cut."""
    t = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*(escape(_cell(v)) for v in row))
    _print_table(t)


def fields(title: str | None, pairs: Iterable[tuple[str, Any]]) -> None:
    """Print ``name: value`` pairs as a two-column table to stdout."""
    t = Table(title=title, title_justify="left", show_header=False, box=None)
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for name, value in pairs:
        t.add_row(escape(name), escape(_cell(value)))
    _print_table(t)


def info(message: str) -> None:
    """A line of human output on stdout."""
    stdout.print(message, highlight=False)


def plain(message: str) -> None:
    """A line of human output on stdout, printed as is (no Rich markup)."""
    stdout.print(message, highlight=False, markup=False)


def error(message: str) -> None:
    """A one-line error on stderr."""
    stderr.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)


def note(message: str) -> None:
    """Progress or a warning on stderr."""
    stderr.print(message, highlight=False)


class Tracker:
    """A progress display on stderr: a spinner, a description, and a bar when the total is known.

    Without a display (stderr is not a terminal) updates go nowhere.
    """

    def __init__(self, progress: Progress | None, task: TaskID | None) -> None:
        self._progress = progress
        self._task = task

    def update(
        self, *, completed: int | None = None, total: int | None = None,
        description: str | None = None,
    ) -> None:
        """Move the display on (any of the three)."""
        if self._progress is None or self._task is None:
            return
        self._progress.update(
            self._task, completed=completed, total=total,
            description=escape(description) if description is not None else None,
        )


@contextmanager
def progress(description: str, *, total: int | None = None) -> Iterator[Tracker]:
    """Show a spinner (and a bar once the total is known) on stderr while the block runs.

    Only on a terminal: written to a pipe or a file, the display would leave its last frame as
    a line of output (before any error line), which scripts then have to read past.
    """
    if not stderr.is_terminal:
        yield Tracker(None, None)
        return
    display = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
    )
    with display:
        task = display.add_task(escape(description), total=total)
        yield Tracker(display, task)
