"""Every view at 80x24 and 120x35: no table runs off the screen, and the columns an operator
needs stay (issue 19.7). Rendering only, so on SQLite, over the pinned demo data."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from kickside_engine import connect_database, migrate
from kickside_tui.widgets.columns import Col, fit_columns
from kickside_tui.widgets.view_table import ViewTable

from .fixtures import build_demo_data, demo_app, settle

#: Per view key: for each table, the columns that must be on screen at any size.
NEEDED: dict[str, dict[str, set[str]]] = {
    "1": {"#queues": {"queue", "available", "executing", "retryable", "completed", "discarded"}},
    "2": {"#jobs": {"id", "state", "worker"}},
    "3": {"#slots": {"namespace", "scope", "key", "state"}},
    "4": {"#leases": {"id", "worker", "lease expires", "elapsed / max"}},
    "5": {
        "#groups": {"group", "global", "waiting"},
        "#waiting": {"job", "concurrency key", "reason"},
    },
    "6": {"#latency": {"queue", "queue time", "run time"}, "#audit": {"at", "action"}},
    "7": {
        "#queues": {"queue", "state", "available", "executing"},
        "#nodes": {"node", "executors", "heartbeat"},
        "#cron": {"entry", "last run", "next run"},
    },
}


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("narrow") / "demo.sqlite3"
    db = connect_database(f"sqlite:///{path}")
    try:
        migrate.upgrade(db)
        build_demo_data(db)
    finally:
        db.dispose()
    return f"sqlite:///{path}"


@pytest.mark.parametrize("size", [(80, 24), (120, 35)], ids=["80x24", "120x35"])
def test_every_table_fits_and_keeps_the_columns_an_operator_needs(
    size: tuple[int, int], demo_url: str
) -> None:
    db = connect_database(demo_url)
    app = demo_app(db)
    problems: list[str] = []

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            for key, tables in NEEDED.items():
                await pilot.press(key)
                await settle(pilot)
                for selector, needed in tables.items():
                    table: DataTable[Any] = app.screen.query_one(selector, DataTable)
                    shown = {str(k.value) for k in table.columns}
                    if missing := needed - shown:
                        problems.append(f"view {key} {selector}: {sorted(missing)} hidden")
                    overflow = table.virtual_size.width - table.scrollable_content_region.width
                    if overflow > 0:
                        problems.append(f"view {key} {selector}: {overflow} cell(s) off screen")

    try:
        asyncio.run(scenario())
    finally:
        db.dispose()
    assert problems == []


def test_columns_give_way_short_labels_then_flexible_then_by_priority() -> None:
    columns = [
        Col("id", "id"),
        Col("state", "state"),
        Col("error", "error", flex=True),
        Col("node", "node name", "node", drop=2),
        Col("tags", "tags", drop=1),
    ]
    content = [8, 9, 40, 15, 10]
    # Room for everything: full labels, natural widths.
    wide = fit_columns(columns, content, 200, padding=2)
    assert [c.key for c in wide.columns] == ["id", "state", "error", "node", "tags"]
    assert wide.labels[3] == "node name" and set(wide.widths) == {None}
    # A little less: short labels and the error cut down before anything goes.
    snug = fit_columns(columns, content, 80, padding=2)
    assert [c.key for c in snug.columns] == ["id", "state", "error", "node", "tags"]
    assert snug.labels[3] == "node" and snug.widths[2] == 80 - (10 + 11 + 17 + 12) - 2
    # Narrow: the highest drop goes first; the error keeps at least its floor.
    narrow = fit_columns(columns, content, 55, padding=2)
    assert [c.key for c in narrow.columns] == ["id", "state", "error", "tags"]
    # An empty column goes before any with content.
    empty = fit_columns(columns, [8, 9, 40, 15, 0], 55, padding=2)
    assert [c.key for c in empty.columns] == ["id", "state", "error", "node"]


def test_a_view_table_refits_when_the_terminal_narrows(demo_url: str) -> None:
    db = connect_database(demo_url)
    app = demo_app(db)

    async def scenario() -> None:
        async with app.run_test(size=(140, 30)) as pilot:
            await pilot.press("4")
            await settle(pilot)
            table = app.screen.query_one("#leases", ViewTable)
            assert "code" in table.shown_columns
            await pilot.resize_terminal(80, 24)
            await settle(pilot)
            assert "code" not in table.shown_columns
            assert "elapsed / max" in table.shown_columns
            await pilot.resize_terminal(140, 30)
            await settle(pilot)
            assert "code" in table.shown_columns

    try:
        asyncio.run(scenario())
    finally:
        db.dispose()
