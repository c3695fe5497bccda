"""Refreshing a DataTable in place without losing the operator's place in it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.console import RenderableType
from rich.text import Text
from textual.widgets import DataTable

Row = tuple[str, Sequence[RenderableType]]


def selected_key(table: DataTable[Any]) -> str | None:
    """The key of the row under the cursor, or None for an empty table."""
    if table.row_count == 0:
        return None
    row = min(max(table.cursor_row, 0), table.row_count - 1)
    key = table.coordinate_to_cell_key((row, 0)).row_key.value  # type: ignore[arg-type]
    return key


def _width(value: RenderableType) -> int:
    if isinstance(value, Text):
        return max((cell_len(line) for line in value.plain.splitlines()), default=0)
    return cell_len(str(value))


def _size_columns(table: DataTable[Any], rows: Sequence[Row], *, grow_only: bool) -> None:
    # Columns are sized here, before anything paints: DataTable would size them on its next
    # idle event, and a frame painted in between stays cached with the old widths.
    for index, column in enumerate(table.ordered_columns):
        if not column.auto_width:
            continue
        widest = max((_width(cells[index]) for _, cells in rows if index < len(cells)), default=0)
        floor = column.content_width if grow_only else _width(column.label)
        column.content_width = max(floor, widest, _width(column.label))


def refill(table: DataTable[Any], rows: Sequence[Row]) -> None:
    """Show ``rows``, keeping the cursor on the same key (or the same position).

    When the same rows come back (the usual refresh) only the cells that changed are
    updated, so an unchanged table costs no rendering at all.
    """
    keys = [key for key, _ in rows]
    current = [str(k.value) for k in table.rows]
    if keys == current:
        changed = [
            (key, column, after)
            for key, cells in rows
            for column, before, after in zip(table.columns, table.get_row(key), cells, strict=False)
            if before != after
        ]
        if changed:
            _size_columns(table, rows, grow_only=True)
            for key, column, after in changed:
                table.update_cell(key, column, after)
        return
    keep = selected_key(table)
    position = table.cursor_row
    scroll_y = table.scroll_y
    table.clear()
    _size_columns(table, rows, grow_only=False)
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if not rows:
        return
    index = keys.index(keep) if keep in keys else min(max(position, 0), len(rows) - 1)
    table.move_cursor(row=index, animate=False, scroll=False)
    table.scroll_to(y=scroll_y, animate=False, immediate=True)
    if keep not in keys:
        table.move_cursor(row=index, animate=False, scroll=True)
