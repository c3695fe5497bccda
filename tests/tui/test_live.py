"""The dashboard refreshes when a change commits elsewhere, not only on its interval."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

from textual.widgets import DataTable

from kickside_engine import Database
from kickside_tui.app import DatabaseNotified
from kickside_tui.screens.base import ViewScreen

from ..conftest import Target
from ..support.processes import ROOT
from .fixtures import make_app, settle, wait_until


def _queues(screen: Any) -> list[str]:
    table = screen.query_one("#queues", DataTable)
    return [str(row.value) for row in table.rows]


def _enqueue_in_another_process(target: Target, queue: str) -> None:
    code = (
        "import sys\n"
        "from kickside_engine import JobBuilder, connect_database, enqueue\n"
        "db = connect_database(sys.argv[1], schema=sys.argv[2] or None)\n"
        "enqueue(db, JobBuilder('ok', {}).queue(sys.argv[3]))\n"
        "db.dispose()\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, target.url, target.schema or "", queue],
        cwd=ROOT,
        check=True,
        timeout=60,
    )


def test_a_commit_in_another_process_refreshes_the_overview_at_once(
    db: Database, target: Target
) -> None:
    """NOTIFY on PostgreSQL; on a SQLite file the subscription's wake socket."""
    app = make_app(db, refresh=60.0)  # the interval alone would not refresh within the test

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            await wait_until(pilot, lambda: app.listening, "the dashboard to LISTEN")
            assert "every 60s and on change" in app.sub_title
            screen = app.screen
            assert isinstance(screen, ViewScreen) and _queues(screen) == []
            _enqueue_in_another_process(target, "fresh")
            await wait_until(pilot, lambda: _queues(screen) == ["fresh"], "the new queue")
            assert app.notifications >= 1 and app.notified_refreshes >= 1

    asyncio.run(scenario())


def test_a_burst_of_notifications_refreshes_once_or_twice(db: Database) -> None:
    app = make_app(db, refresh=60.0)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, ViewScreen)
            before = screen.loaded
            for i in range(20):
                app.post_message(DatabaseNotified(f"queue-{i}"))
            await wait_until(pilot, lambda: app.notifications == 20, "the notifications")
            await wait_until(pilot, lambda: app.notified_refreshes >= 1, "a refresh")
            await settle(pilot)
            assert 1 <= app.notified_refreshes <= 2
            assert screen.loaded > before

    asyncio.run(scenario())
