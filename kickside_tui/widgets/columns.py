"""Columns that fit the terminal and rows that sort: the pure half of :mod:`view_table`.

A view declares every column once (:class:`Col`); :func:`fit_columns` picks those that fit a
width (short labels first, then cutting the flexible column, then dropping the ones an operator
needs least) and :func:`sort_rows` orders rows by a column, by value where a cell says
(:class:`Ordered`), else by its text with numbers as numbers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.console import RenderableType
from rich.text import Text

from kickside_tui.widgets.tables import Row

#: A flexible column is never squeezed below this many cells (without its padding).
FLEX_MIN = 12
#: Marks on the label of the column the rows are sorted by.
ASCENDING, DESCENDING = " \u25b2", " \u25bc"


@dataclass(frozen=True)
class Col:
    """A column: its key, its label, and how it gives way on a narrow terminal.

    ``short`` is the label used when the full labels do not fit; ``drop`` 0 means always shown,
    higher numbers are dropped first; a ``flex`` column is cut to the width left over (down to
    :data:`FLEX_MIN`) before anything is dropped.
    """

    key: str
    label: str
    short: str = ""
    drop: int = 0
    flex: bool = False


class Ordered(Text):
    """A cell whose order differs from its text's (``5s ago`` after ``1m00s ago``).

    ``order`` is what the column sorts by; None sorts last whichever the direction.
    """

    def __init__(
        self, text: str | Text, order: Any, *, style: str = "", justify: Any = None
    ) -> None:
        base = text if isinstance(text, Text) else Text(text, style=style)
        super().__init__(
            base.plain, style=base.style, justify=justify or base.justify, spans=list(base.spans)
        )
        self.order = order


def cell_width(value: RenderableType) -> int:
    """The cells a table cell's widest line takes."""
    if isinstance(value, Text):
        return max((cell_len(line) for line in value.plain.splitlines()), default=0)
    return cell_len(str(value))


def cell_text(value: RenderableType) -> str:
    """A table cell's plain text (what the row filter searches)."""
    return value.plain if isinstance(value, Text) else str(value)


_NUMBER = re.compile(r"^[\u2248~]?-?[\d,]+(\.\d+)?$")
_MISSING = frozenset({"", "-", "never", "none", "?"})


def text_order(text: str) -> Any:
    """How a cell's text sorts: numbers by value, ``a2`` before ``a10``, ``-`` last (None)."""
    value = text.strip().lower()
    if value in _MISSING:
        return None
    if _NUMBER.match(value):
        return (0, float(value.lstrip("\u2248~").replace(",", "")), value)
    parts = re.split(r"(\d+)", value)
    return (1, tuple(int(p) if i % 2 else p for i, p in enumerate(parts)))


def cell_order(cell: RenderableType) -> Any:
    """The order of one cell: :attr:`Ordered.order`, or its text's."""
    if isinstance(cell, Ordered):
        return None if cell.order is None else (-1, cell.order)
    return text_order(cell_text(cell))


def sort_rows(rows: Sequence[Row], index: int, *, descending: bool) -> list[Row]:
    """``rows`` by the cells in column ``index``; rows without a value go last, in order."""
    keyed = [
        (cell_order(cells[index]) if index < len(cells) else None, row)
        for row in rows
        for cells in (row[1],)
    ]
    present = [(order, row) for order, row in keyed if order is not None]
    missing = [row for order, row in keyed if order is None]
    try:
        present.sort(key=lambda pair: pair[0], reverse=descending)
    except TypeError:  # a column mixing kinds of values: by text, still deterministic
        present.sort(key=lambda pair: str(pair[0]), reverse=descending)
    return [row for _, row in present] + missing


@dataclass(frozen=True)
class Layout:
    """The columns shown, their labels, and the width of each cut-down flexible one."""

    columns: tuple[Col, ...]
    labels: tuple[str, ...]
    widths: tuple[int | None, ...]


def fit_columns(
    columns: Sequence[Col],
    content: Sequence[int],
    available: int,
    *,
    padding: int,
    marks: dict[str, str] | None = None,
) -> Layout:
    """Which columns fit in ``available`` cells, given each column's widest cell.

    Full labels if everything fits; else short labels, flexible columns cut down, and
    columns dropped one at a time until the rest fit: empty ones first, then those with the
    highest :attr:`Col.drop`.
    """
    marks = marks or {}
    indexed = list(enumerate(columns))

    def label(col: Col, short: bool) -> str:
        return ((col.short or col.label) if short else col.label) + marks.get(col.key, "")

    def attempt(shown: list[tuple[int, Col]], short: bool) -> Layout | None:
        labels = [label(col, short) for _, col in shown]
        natural = [
            max(content[i], cell_len(text)) + padding
            for (i, _), text in zip(shown, labels, strict=True)
        ]
        if available <= 0 or sum(natural) <= available:
            return Layout(tuple(c for _, c in shown), tuple(labels), (None,) * len(shown))
        if not short:
            return None
        flexible = [n for n, (_, col) in enumerate(shown) if col.flex]
        fixed = sum(w for n, w in enumerate(natural) if n not in flexible)
        if not flexible:
            return None
        each = (available - fixed) // len(flexible)
        floor = [max(FLEX_MIN, cell_len(labels[n])) + padding for n in flexible]
        if any(each < f for f in floor):
            return None
        widths: list[int | None] = [None] * len(shown)
        for n in flexible:
            if natural[n] > each:
                widths[n] = each - padding
        return Layout(tuple(c for _, c in shown), tuple(labels), tuple(widths))

    shown = list(indexed)
    layout = attempt(shown, short=False) or attempt(shown, short=True)
    # An empty column goes first (nothing in it to miss), then by drop, rightmost first.
    droppable = sorted(
        (pair for pair in indexed if pair[1].drop > 0),
        key=lambda pair: (content[pair[0]] > 0, -pair[1].drop, -pair[0]),
    )
    while layout is None and droppable:
        gone = droppable.pop(0)
        shown = [pair for pair in shown if pair[0] != gone[0]]
        layout = attempt(shown, short=True)
    return layout or Layout(
        tuple(c for _, c in shown), tuple(label(c, True) for _, c in shown), (None,) * len(shown)
    )


def cut(cell: RenderableType, width: int) -> RenderableType:
    """``cell`` cut to ``width`` cells, with an ellipsis where it was cut."""
    text = cell.copy() if isinstance(cell, Text) else Text(str(cell))
    if text.cell_len > width:
        text.truncate(width, overflow="ellipsis")
    return text
