"""Without colour (``NO_COLOR``) every view still says what its colours say, in words.

The dashboard colours states, paused queues and expired leases; an operator on a monochrome
terminal, or one who does not tell the colours apart, must read the same facts from the text.
These tests run the app with ``NO_COLOR`` set (Textual then renders in monochrome) and read the
screen as text, the way such an operator sees it.
"""

from __future__ import annotations

import asyncio
import io
import re
from typing import Any

import pytest
from rich.console import Console
from textual.app import App
from textual.filter import Monochrome, NoColor

from kickside_engine import Database
from kickside_engine.control import JobFilter, list_jobs

from .fixtures import build_demo_data, demo_app, settle

ROW_ID = re.compile(r"^ ([0-9a-f]{8})  +(\w+)")


def _screen_text(app: App[Any]) -> str:
    """The current screen as the terminal shows it, characters only."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, color_system=None
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


def _rows(text: str) -> dict[str, str]:
    """Table rows that start with a short job id: id -> the word in the next column."""
    rows: dict[str, str] = {}
    for line in text.splitlines():
        match = ROW_ID.match(line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_without_colour_every_view_says_in_words_what_its_colours_say(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    build_demo_data(db)
    states = {str(job.id)[-8:]: job.state for job in list_jobs(db, JobFilter(), limit=500).jobs}
    app = demo_app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 50)) as pilot:
            await settle(pilot)
            assert app.no_color
            assert any(isinstance(f, Monochrome | NoColor) for f in app._filters)

            overview = _screen_text(app)
            assert re.search(r"exports +paused", overview), overview
            assert "reports (no node)" in overview
            assert "1 expired lease(s) not yet rescued" in overview

            await pilot.press("2")
            await settle(pilot)
            shown = _rows(_screen_text(app))
            assert len(shown) >= 30, shown
            # Every job's state is spelled out beside it, as the database has it.
            assert {k: states[k] for k in shown} == shown
            assert {
                "available",
                "executing",
                "scheduled",
                "completed",
                "discarded",
                "retryable",
                "parked",
                "disabled",
            } <= set(shown.values())

            await pilot.press("3")
            await settle(pilot)
            slots = _screen_text(app)
            for state in ("scheduled", "parked", "available due", "disabled", "executing"):
                assert state in slots, (state, slots)

            await pilot.press("4")
            await settle(pilot)
            leases = _screen_text(app)
            expired = [line for line in leases.splitlines() if "rebuild_index" in line]
            assert expired and "expired" in expired[0], leases

    asyncio.run(scenario())
