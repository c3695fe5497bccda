"""The only module of the CLI that writes to the terminal.

Human output goes to stdout as tables and text; with ``--json`` stdout carries exactly one JSON
document (a result, or an error document). Progress, warnings and errors always go to stderr.

Tables fit the terminal: ``COLUMNS`` when set, else the terminal's width. When a table is too
wide, the least needed columns go first (each :class:`Column` has a priority) and free text is
cut with an ellipsis, so every row stays one line; job ids show as their last 8 hex digits
(:func:`~kickside_engine.control.short_ids.short_id`, which every command taking an id accepts).
Written to a pipe or a file without ``COLUMNS``, a table has every column at its natural width
(rows never folded: greppable). ``--wide`` shows every column and full ids, however wide.
Lines never end in padding.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import json
import os
import re
import sys
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Literal

from rich.cells import cell_len
from rich.console import Console, RenderableType
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

from kickside_engine.control import short_id

stdout = Console(soft_wrap=True)
stderr = Console(stderr=True, soft_wrap=True)

#: The narrowest a column of free text is cut to before less needed columns are dropped.
FLEX_MIN = 20
#: Spaces between two columns.
GAP = 2
#: Width a table may take when nothing limits it (a pipe without COLUMNS, or --wide).
UNLIMITED = 100_000
_TRAILING_SPACE = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$")


@dataclasses.dataclass
class _Settings:
    wide: bool = False


_settings = _Settings()


def configure(*, wide: bool) -> None:
    """Set how tables are shown for this run (``--wide``)."""
    _settings.wide = wide


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column: its header, and how it gives way when the terminal is narrow.

    ``priority`` 0 is always shown; when the table does not fit, the column with the highest
    priority goes first. ``flex`` marks free text (an error, details): cut with an ellipsis to
    fit, down to :data:`FLEX_MIN`, before a column is dropped.
    """

    header: str
    priority: int = 0
    flex: bool = False
    justify: Literal["left", "right"] = "left"


def terminal_width() -> int | None:
    """The width tables must fit: ``COLUMNS`` if set, else the terminal's; None for a pipe or
    a file without ``COLUMNS`` (no limit)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if _is_terminal():
        return stdout.size.width
    return None


def _is_terminal() -> bool:
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(isatty is not None and isatty())


def _write(renderable: RenderableType, width: int | None) -> None:
    """Render at ``width`` (None: natural width) and write the lines, right-trimmed."""
    tty = _is_terminal()
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or UNLIMITED,
        force_terminal=tty,
        color_system="auto" if tty else None,
        no_color=stdout.no_color,
        highlight=False,
        legacy_windows=False,
    )
    console.print(renderable)
    lines = (_TRAILING_SPACE.sub(r"\1", line) for line in buffer.getvalue().splitlines())
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()


def render(renderable: RenderableType) -> None:
    """Print any Rich renderable (a tree) to stdout, fitted to the terminal."""
    _write(renderable, None if _settings.wide else terminal_width())


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


def error_document(
    code: str, message: str, exit_code: int, details: dict[str, Any] | None = None
) -> None:
    """Write the one error document every command prints on stdout under ``--json``:
    ``{"error": {"code", "message", "exit_code", "details"}}``."""
    emit_json(
        {
            "error": {
                "code": code,
                "message": message,
                "exit_code": exit_code,
                "details": details or {},
            }
        }
    )


def _cell(value: Any, *, full_ids: bool = True) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, uuid.UUID) and not full_ids:
        return short_id(value)
    if isinstance(value, dict | list):
        return json.dumps(to_jsonable(value), ensure_ascii=False)
    return str(to_jsonable(value))


def cell(value: Any) -> str:
    """A value as a table shows it (a job id short, unless ``--wide``), for running text."""
    return _cell(value, full_ids=_settings.wide)


def _widths(headers: Sequence[str], rows: list[list[str]]) -> list[int]:
    widths = [cell_len(h) for h in headers]
    for row in rows:
        for i, text in enumerate(row):
            widths[i] = max(widths[i], *(cell_len(line) for line in text.split("\n")))
    return widths


def _fit(
    columns: Sequence[Column], natural: list[int], width: int, empty: set[int]
) -> tuple[list[int], dict[int, int]]:
    """Which columns to show within ``width`` (by index), and the width of each flex column.

    Droppable columns that are ``empty`` (no row has a value) go first, then by priority.
    """
    kept = list(range(len(columns)))

    def need(shown: list[int]) -> int:
        total = sum(min(natural[i], FLEX_MIN) if columns[i].flex else natural[i] for i in shown)
        return total + GAP * (len(shown) - 1)

    while need(kept) > width:
        droppable = [i for i in kept if columns[i].priority > 0]
        if not droppable:
            break
        kept.remove(max(droppable, key=lambda i: (i in empty, columns[i].priority, i)))
    flex = [i for i in kept if columns[i].flex]
    fixed = sum(natural[i] for i in kept if not columns[i].flex) + GAP * (len(kept) - 1)
    spare = width - fixed
    # Each flex column gets up to FLEX_MIN first, then a share of what is left by its want.
    cut = {i: min(natural[i], FLEX_MIN) for i in flex}
    left = spare - sum(cut.values())
    if left < 0:
        total = sum(cut.values()) or 1
        cut = {i: max(4, w * max(spare, 0) // total) for i, w in cut.items()}
    else:
        wants = {i: natural[i] - cut[i] for i in flex}
        total = sum(wants.values()) or 1
        cut = {i: cut[i] + min(wants[i], left * wants[i] // total) for i in flex}
    return kept, cut


def table(
    title: str | None, columns: Sequence[str | Column], rows: Iterable[Sequence[Any]]
) -> None:
    """Print a table to stdout that fits the terminal (see the module's docstring)."""
    cols = [c if isinstance(c, Column) else Column(c) for c in columns]
    wide = _settings.wide
    texts = [[_cell(v, full_ids=wide) for v in row] for row in rows]
    width = None if wide else terminal_width()
    natural = _widths([c.header for c in cols], texts)
    empty = {i for i in range(len(cols)) if not any(row[i] for row in texts)}
    kept, cut = (list(range(len(cols))), {}) if width is None else _fit(cols, natural, width, empty)
    t = Table(
        title=title,
        title_justify="left",
        header_style="bold",
        box=None,
        pad_edge=False,
        padding=(0, GAP // 2),
    )
    for i in kept:
        if i in cut:
            t.add_column(
                cols[i].header,
                justify=cols[i].justify,
                no_wrap=True,
                overflow="ellipsis",
                max_width=cut[i],
            )
        else:
            t.add_column(cols[i].header, justify=cols[i].justify, overflow="fold")
    for row in texts:
        t.add_row(*(escape(row[i]) for i in kept))
    _write(t, width)
    hidden = [cols[i].header for i in range(len(cols)) if i not in kept]
    if hidden and _is_terminal():
        note(
            f"[dim]hidden to fit {width} columns: {escape(', '.join(hidden))} "
            "(--wide shows every column)[/]"
        )


def fields(title: str | None, pairs: Iterable[tuple[str, Any]]) -> None:
    """Print ``name: value`` pairs as a two-column table to stdout (ids in full)."""
    t = Table(
        title=title,
        title_justify="left",
        show_header=False,
        box=None,
        pad_edge=False,
        padding=(0, GAP // 2),
    )
    t.add_column(style="bold", no_wrap=True)
    t.add_column(overflow="fold")
    for name, value in pairs:
        t.add_row(escape(name), escape(_cell(value)))
    _write(t, None if _settings.wide else terminal_width())


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


def ask(question: str) -> str:
    """Ask ``question`` on stderr and read one line of answer from stdin ("" at its end).

    Ctrl-C raises :class:`KeyboardInterrupt` (the command exits 130, as anywhere else).
    """
    stderr.print(question, end=" ", highlight=False, markup=False)
    return sys.stdin.readline().strip()


class Tracker:
    """A progress display on stderr: a spinner, a description, and a bar when the total is known.

    Without a display (stderr is not a terminal) updates go nowhere.
    """

    def __init__(self, progress: Progress | None, task: TaskID | None) -> None:
        self._progress = progress
        self._task = task

    def update(
        self,
        *,
        completed: int | None = None,
        total: int | None = None,
        description: str | None = None,
    ) -> None:
        """Move the display on (any of the three)."""
        if self._progress is None or self._task is None:
            return
        self._progress.update(
            self._task,
            completed=completed,
            total=total,
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
