"""The table every view shows: columns that fit the terminal, sorting, a row filter and keys.

A :class:`ViewTable` is given every column once (:class:`Col`) and every row with a cell for
each column; it decides what fits. When the terminal is too narrow it first shortens labels,
then shrinks the flexible column (an error, a reason) and only then drops columns, the ones
an operator needs least first (:attr:`Col.drop`). Narrow or wide, the columns an operator
needs (an id, a state, elapsed time) stay.

The keys it adds are those of k9s and of Oban Web's tables: ``j``/``k`` move, ``s`` sorts
(by a column, then in reverse, then by the next; a click on a header sorts by that column, a
second click reverses, a third goes back to the view's own order), ``/`` narrows the rows to those
containing a text, ``y`` copies the row's id to the clipboard, and ``enter`` on a row that is a
job opens that job (:class:`JobChosen`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import RenderableType
from textual import events, on
from textual.actions import SkipAction
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Input

from kickside_tui.widgets.columns import (
    ASCENDING,
    DESCENDING,
    Col,
    Layout,
    Ordered,
    cell_text,
    cell_width,
    cut,
    fit_columns,
    sort_rows,
    text_order,
)
from kickside_tui.widgets.tables import Row, refill, selected_key


@dataclass
class JobChosen(Message):
    """Enter (or a click on the highlighted row) on a row that is a job: open that job."""

    job_id: uuid.UUID


class RowFilter(Input):
    """The ``/`` filter above a table: narrows its rows as you type; escape clears it."""

    DEFAULT_CSS = """
    RowFilter {
        height: 1;
        margin: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "clear", "Clear the filter", show=False),
    ]

    def __init__(self, table: ViewTable) -> None:
        super().__init__(
            placeholder="filter rows: type, enter keeps it, esc clears",
            compact=True,
            classes="row-filter",
        )
        self.table = table

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.table.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.table.focus()

    def action_clear(self) -> None:
        self.table.set_filter("")
        self.table.focus()
        self.remove()


class ViewTable(DataTable[Any]):
    """A row-cursor table that fits, sorts, filters and copies; see the module's docstring."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("s", "sort_next", "Sort (next column or direction)", show=False),
        Binding("slash", "filter", "Filter the rows", show=False),
        Binding("y", "copy_id", "Copy the id", show=False),
    ]

    def __init__(
        self,
        columns: Sequence[Col],
        *,
        id: str,
        copy_what: str = "id",
        copy_value: Callable[[str], str | None] | None = None,
        job_of: Callable[[str], uuid.UUID | None] | None = None,
        filterable: bool = True,
        zebra_stripes: bool = True,
    ) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=zebra_stripes)
        self.all_columns = tuple(columns)
        #: What ``y`` copies, named in the notice; ``copy_value`` maps a row key to it.
        self.copy_what = copy_what
        self.copy_value = copy_value
        #: The job a row stands for (its key, by default for tables of jobs), or None.
        self.job_of = job_of
        self.filterable = filterable
        #: The column the rows are sorted by (None: the view's own order) and the direction.
        self.sort_column: str | None = None
        self.descending = False
        self.filter_text = ""
        self.fitted: Layout | None = None
        self._rows: list[Row] = []
        for col in self.all_columns:
            self.add_column(col.label, key=col.key)

    @property
    def shown_columns(self) -> tuple[str, ...]:
        """The keys of the columns on screen, left to right."""
        return tuple(str(key.value) for key in self.columns)

    # --- filling ---------------------------------------------------------------------------

    def fill(self, rows: Sequence[Row]) -> None:
        """Show ``rows`` (a cell per declared column), filtered, sorted and fitted."""
        self._rows = list(rows)
        self._show()

    def _visible_rows(self) -> list[Row]:
        rows = self._rows
        if self.filter_text:
            needle = self.filter_text.lower()
            rows = [
                row for row in rows if any(needle in cell_text(cell).lower() for cell in row[1])
            ]
        if self.sort_column is not None:
            index = next(i for i, c in enumerate(self.all_columns) if c.key == self.sort_column)
            rows = sort_rows(rows, index, descending=self.descending)
        return rows

    def _available(self, row_count: int) -> int:
        width = self.size.width
        if width <= 0:
            return 0
        if row_count + self.header_height > self.size.height:
            width -= self.styles.scrollbar_size_vertical
        return width

    def _show(self) -> None:
        rows = self._visible_rows()
        content = [0] * len(self.all_columns)
        for _, cells in rows:
            for i, cell in enumerate(cells[: len(content)]):
                content[i] = max(content[i], cell_width(cell))
        marks = {}
        if self.sort_column is not None:
            marks[self.sort_column] = DESCENDING if self.descending else ASCENDING
        layout = fit_columns(
            self.all_columns,
            content,
            self._available(len(rows)),
            padding=2 * self.cell_padding,
            marks=marks,
        )
        index = {c.key: i for i, c in enumerate(self.all_columns)}
        projected: list[Row] = []
        for key, cells in rows:
            shown: list[RenderableType] = []
            for col, width in zip(layout.columns, layout.widths, strict=True):
                i = index[col.key]
                cell = cells[i] if i < len(cells) else ""
                shown.append(cell if width is None else cut(cell, width))
            projected.append((key, shown))
        if layout != self.fitted:
            self._rebuild(layout, projected)
        else:
            refill(self, projected)

    def _rebuild(self, layout: Layout, rows: list[Row]) -> None:
        keep, position, scroll_y = selected_key(self), self.cursor_row, self.scroll_y
        self.fitted = layout
        self.clear(columns=True)
        for col, label, width in zip(layout.columns, layout.labels, layout.widths, strict=True):
            self.add_column(label, key=col.key, width=width)
        refill(self, rows)
        if not rows:
            return
        keys = [key for key, _ in rows]
        at = keys.index(keep) if keep in keys else min(max(position, 0), len(rows) - 1)
        self.move_cursor(row=at, animate=False, scroll=False)
        self.scroll_to(y=scroll_y, animate=False, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        if self._rows:
            self._show()

    # --- sorting ---------------------------------------------------------------------------

    def sort_by(self, column: str | None, *, descending: bool = False) -> None:
        """Sort by ``column`` (None: the view's own order)."""
        self.sort_column, self.descending = column, descending
        self._show()

    def action_sort_next(self) -> None:
        """Up by a column, then down by it, then the next column; after the last, the view's
        own order. One lower-case key: with Caps Lock on, a capital does nothing."""
        shown = self.shown_columns
        if self.sort_column not in shown:
            self.sort_by(shown[0] if shown else None)
        elif not self.descending:
            self.sort_by(self.sort_column, descending=True)
        else:
            after = shown.index(self.sort_column) + 1
            self.sort_by(shown[after] if after < len(shown) else None)

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = str(event.column_key.value)
        if column != self.sort_column:
            self.sort_by(column)
        elif not self.descending:
            self.sort_by(column, descending=True)
        else:
            self.sort_by(None)

    # --- filter, copy, open ----------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Without a filter, "/" goes on to the view (the Jobs view's own search).
        return action != "filter" or self.filterable

    def set_filter(self, text: str) -> None:
        """Show only the rows with a cell containing ``text`` (any case); "" shows all."""
        self.filter_text = text.strip()
        self._show()

    def action_filter(self) -> None:
        if not self.filterable:
            raise SkipAction()
        existing = self.parent.query_children(RowFilter) if self.parent else None
        box = next((f for f in existing or () if f.table is self), None)
        if box is None:
            box = RowFilter(self)
            self.parent.mount(box, before=self)  # type: ignore[union-attr]
        box.focus()

    def declared_row(self, key: str) -> list[RenderableType]:
        """Row ``key``'s cell in every declared column, shown on this terminal or not."""
        return next(list(cells) for k, cells in self._rows if k == key)

    def selected_row(self) -> str | None:
        """The key of the row under the cursor (None for an empty table)."""
        return selected_key(self)

    def action_copy_id(self) -> None:
        key = self.selected_row()
        value = None if key is None else (self.copy_value(key) if self.copy_value else key)
        if value is None:
            self.notify(f"no {self.copy_what} to copy here", severity="warning")
            return
        self.app.copy_to_clipboard(value)
        self.notify(f"copied {self.copy_what} {value}", title="clipboard")

    @on(DataTable.RowSelected)
    def _row_chosen(self, event: DataTable.RowSelected) -> None:
        if self.job_of is None:
            return
        job_id = self.job_of(str(event.row_key.value))
        if job_id is None:
            self.notify("no job on this row", severity="warning")
            return
        self.post_message(JobChosen(job_id))


def job_key(key: str) -> uuid.UUID | None:
    """A row key that is a job id, as a UUID (None for anything else)."""
    try:
        return uuid.UUID(key)
    except ValueError:
        return None


__all__ = ["Col", "JobChosen", "Ordered", "ViewTable", "fit_columns", "job_key", "text_order"]
