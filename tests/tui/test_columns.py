"""Sorting table rows: numbers by value, times by the value behind their text, blanks last."""

from __future__ import annotations

from datetime import timedelta

from rich.text import Text

from kickside_tui.widgets.columns import Ordered, sort_rows, text_order


def _rows(*cells: object) -> list[tuple[str, list[object]]]:
    return [(str(i), [cell]) for i, cell in enumerate(cells)]


def test_numbers_sort_by_value_and_names_naturally() -> None:
    rows = _rows("10", "9", "1,200", "-", "2")
    assert [r[1][0] for r in sort_rows(rows, 0, descending=False)] == ["2", "9", "10", "1,200", "-"]
    names = _rows("worker-10", "worker-9", "Worker-1")
    assert [r[1][0] for r in sort_rows(names, 0, descending=False)] == [
        "Worker-1",
        "worker-9",
        "worker-10",
    ]
    assert text_order("never") is None and text_order("  ") is None


def test_ordered_cells_sort_by_their_value_and_none_goes_last_either_way() -> None:
    cells = [
        Ordered("1m10s ago", timedelta(seconds=70)),
        Ordered("5d0h ago", timedelta(days=5)),
        Ordered(Text("never", style="dim"), None),
        Ordered("44s ago", timedelta(seconds=44)),
    ]
    up = [r[1][0].plain for r in sort_rows(_rows(*cells), 0, descending=False)]
    down = [r[1][0].plain for r in sort_rows(_rows(*cells), 0, descending=True)]
    assert up == ["44s ago", "1m10s ago", "5d0h ago", "never"]
    assert down == ["5d0h ago", "1m10s ago", "44s ago", "never"]
    assert cells[2].style == "dim"  # the text keeps its look


def test_equal_values_keep_the_views_order() -> None:
    rows = _rows("3", "2", "3", "2")
    assert [r[0] for r in sort_rows(rows, 0, descending=True)] == ["0", "2", "1", "3"]
