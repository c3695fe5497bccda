"""What keeps the dashboard fast on a big history: searches read the table window by window
(shown as they go, stoppable) and large final-state counts are estimates marked with ≈."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from textual.widgets import DataTable, Input, Static

from kickside_engine import Database
from kickside_engine.control import JobFilter, list_jobs
from kickside_tui.adapter import Adapter, JobsData
from kickside_tui.app import KicksideApp
from kickside_tui.screens.jobs import JobsScreen

from .fixtures import build_demo_data, demo_adapter_kwargs, make_app, plain, settle, wait_until

NEEDLE = "acme"


def _keys(table: DataTable[Any]) -> list[str]:
    return [str(row.value) for row in table.rows]


def _status(screen: JobsScreen) -> str:
    return plain(screen.query_one("#status", Static).content)


async def _search(pilot: Any, app: KicksideApp, needle: str) -> JobsScreen:
    await pilot.press("2")
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, JobsScreen)
    await pilot.press("slash", *needle, "enter")
    return screen


def test_a_search_reads_window_after_window_and_finds_every_match(db: Database) -> None:
    build_demo_data(db)
    expected = [str(j.id) for j in list_jobs(db, JobFilter(search=NEEDLE), limit=100).jobs]
    assert len(expected) >= 2
    app = make_app(db, search_window=4, **demo_adapter_kwargs())

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await _search(pilot, app, NEEDLE)
            await settle(pilot)
            assert _keys(screen.query_one("#jobs", DataTable)) == expected
            assert screen.last_search is not None and screen.last_search.windows > 1
            status = _status(screen)
            assert "searched every job" in status and "g: search again" in status
            # A search that needed several windows is not rerun by the timer; g reruns it.
            loads = screen.loaded
            app.refresh_views(auto=True)
            await settle(pilot)
            assert screen.loaded == loads
            await pilot.press("g")
            await settle(pilot)
            assert screen.loaded == loads + 1

    asyncio.run(scenario())


class _HeldAdapter(Adapter):
    """Holds a search after its first window until the test releases it."""

    release: threading.Event

    def search(
        self,
        flt: JobFilter,
        *,
        cursor: str | None = None,
        limit: int = 50,
        on_progress: Callable[[int, datetime | None], None] | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> JobsData:
        def held(found: int, scanned_to: datetime | None) -> None:
            if on_progress is not None:
                on_progress(found, scanned_to)
            assert self.release.wait(15), "the test never released the search"

        return super().search(flt, cursor=cursor, limit=limit, on_progress=held, stop=stop)


def test_escape_stops_a_search_and_n_continues_it(db: Database) -> None:
    build_demo_data(db)
    adapter = _HeldAdapter(db, search_window=2, **demo_adapter_kwargs())
    adapter.release = threading.Event()
    app = KicksideApp(adapter, refresh_seconds=60)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await _search(pilot, app, "no such needle")
            await wait_until(pilot, lambda: "searching" in _status(screen), "searching…")
            await wait_until(pilot, lambda: "back to" in _status(screen), "the progress")
            await pilot.press("escape")
            adapter.release.set()
            await settle(pilot)
            status = _status(screen)
            assert "stopped at" in status and "n: search older" in status, status
            assert screen.next_cursor is not None
            await pilot.press("n")
            await settle(pilot)
            assert "page 2" in _status(screen)

    asyncio.run(scenario())


def test_large_final_counts_show_as_estimates_on_postgresql(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_demo_data(db)
    monkeypatch.setattr("kickside_engine.control.counts.EXACT_UP_TO", 2)
    app = make_app(db, **demo_adapter_kwargs())

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            table = app.screen.query_one("#queues", DataTable)
            completed = str(table.get_cell("mailers", "completed"))
            summary = plain(app.screen.query_one("#summary", Static).content)
            if db.is_postgresql:
                assert completed.startswith("\u2248"), completed
                assert "\u2248 estimated from a sample" in summary
                assert str(table.get_cell("mailers", "available")) == "3"  # never estimated
            else:
                assert completed == "21" and "\u2248" not in summary

    asyncio.run(scenario())


def test_the_search_input_keeps_its_text(db: Database) -> None:
    app = make_app(db)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            screen = await _search(pilot, app, NEEDLE)
            await settle(pilot)
            assert screen.query_one("#f-search", Input).value == NEEDLE
            assert "searched every job" in _status(screen)

    asyncio.run(scenario())
