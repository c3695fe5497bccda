"""Read-only mode, database outages, and the live refresh."""

from __future__ import annotations

import asyncio

import pytest

from kickside_engine import Database, JobState, connect_database, get_job
from kickside_engine.control import list_audit, list_queues
from kickside_tui.adapter import Adapter, ReadOnlyError
from kickside_tui.app import KicksideApp
from kickside_tui.screens.base import ViewScreen
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.widgets.chrome import Banner, ViewBar

from ..conftest import require_postgres
from .fixtures import NOW, build_demo_data, demo_adapter_kwargs, make_app, plain, settle, wait_until

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/x"


def test_read_only_refuses_every_action(db: Database) -> None:
    ids = build_demo_data(db)
    audit_before = len(list_audit(db, limit=1000).entries)
    app = make_app(db, read_only=True, **demo_adapter_kwargs())
    first = ids.available[0]

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "read-only" in app.sub_title
            assert "READ-ONLY" in plain(app.screen.query_one(ViewBar).render())
            await pilot.press("2")
            await settle(pilot)
            jobs = app.screen
            table = jobs.query_one("#jobs")
            table.move_cursor(row=table.get_row_index(str(first)))  # type: ignore[attr-defined]
            for action in ("cancel", "discard", "retry", "wake", "park", "bulk"):
                assert jobs.check_action(action, ()) is None, action
            await pilot.press("c", "d", "r", "w", "k", "C", "R", "D")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("3")
            await settle(pilot)
            await pilot.press("w", "k", "e", "x")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("7")
            await settle(pilot)
            await pilot.press("p", "r")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)

    asyncio.run(scenario())
    assert get_job(db, first).state is JobState.AVAILABLE  # type: ignore[union-attr]
    assert {q.name: q.paused for q in list_queues(db, NOW)}["exports"] is True
    assert len(list_audit(db, limit=1000).entries) == audit_before
    adapter = Adapter(db, read_only=True)
    with pytest.raises(ReadOnlyError):
        adapter.cancel(first, NOW)
    with pytest.raises(ReadOnlyError):
        adapter.pause_queue("default", NOW)
    assert get_job(db, first).state is JobState.AVAILABLE  # type: ignore[union-attr]


def test_an_unreachable_database_shows_a_banner_and_recovers(db: Database) -> None:
    require_postgres()
    down = connect_database(UNREACHABLE)
    adapter = Adapter(down, **demo_adapter_kwargs())
    app = KicksideApp(adapter, refresh_seconds=60)

    def banner() -> Banner:
        return app.screen.query_one(Banner)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            assert banner().shown
            assert "DATABASE UNAVAILABLE" in plain(banner().render())
            await pilot.press("2")
            await settle(pilot)
            assert banner().shown, "every view says so"
            # It keeps trying, and recovers when the database is back.
            adapter.db = db
            app.refresh_views()
            await settle(pilot)
            assert not banner().shown
            screen = app.screen
            assert isinstance(screen, ViewScreen) and screen.loaded >= 1

    try:
        asyncio.run(scenario())
    finally:
        down.dispose()


def test_views_refresh_on_their_own(db: Database) -> None:
    app = make_app(db, refresh=0.2)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            screen = app.screen
            assert isinstance(screen, ViewScreen)
            await wait_until(pilot, lambda: screen.loaded >= 3, "three refreshes")
            await pilot.press("minus")  # slower
            assert app.refresh_seconds == pytest.approx(0.4)
            await pilot.press("plus", "plus")  # faster, down to the floor
            assert app.refresh_seconds == pytest.approx(0.2)

    asyncio.run(scenario())
