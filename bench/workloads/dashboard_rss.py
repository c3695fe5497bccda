"""The real dashboard, headless, over a database: prints its resident memory as JSON.

    python -m bench.workloads.dashboard_rss --database-url URL [--schema NAME]

Runs :class:`~kickside_tui.app.KicksideApp` with ``App.run_test`` (120x40), shows every view
twice (each until its data has loaded), searches the Jobs view, and prints one JSON line:
``{"rss_mb": ..., "peak_rss_mb": ..., "views": ...}`` read from ``/proc/self/status``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input

from kickside_engine import connect_database
from kickside_tui.adapter import Adapter
from kickside_tui.app import KicksideApp
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.chrome import VIEWS

LOAD_TIMEOUT_S = 60.0
SEARCH = "user4242@"


def status_mb(field: str) -> float:
    """A ``/proc/self/status`` memory field (``VmRSS``, ``VmHWM``) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


async def _until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def _show(pilot: Pilot[None], app: KicksideApp, key: str) -> ViewScreen:
    """Switch to the view of ``key``, wait for its data, then refresh it once more."""
    await pilot.press(key)
    await pilot.pause()
    screen = app.view_screen()
    assert screen is not None
    await _until(pilot, lambda: screen.loaded >= 1 and not screen.fetching, f"view {key}")
    before = screen.loaded
    screen.reload()
    await _until(pilot, lambda: screen.loaded > before, f"view {key} to refresh")
    return screen


async def tour(app: KicksideApp) -> int:
    """Show every view twice and search the Jobs view; the number of views shown."""
    visits = 0
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(2):
            for _name, key, _label in VIEWS:
                await _show(pilot, app, key)
                visits += 1
        screen = await _show(pilot, app, "2")
        before = screen.loaded
        field = screen.query_one("#f-search", Input)
        field.value = SEARCH
        await field.action_submit()
        await _until(pilot, lambda: screen.loaded > before, "the search")
        visits += 1
    return visits


def main() -> None:
    """Run the tour and print the memory figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--schema")
    args = parser.parse_args()
    logging.getLogger("kickside").addHandler(logging.NullHandler())
    logging.getLogger("kickside").propagate = False
    db = connect_database(args.database_url, schema=args.schema)
    try:
        visits = asyncio.run(tour(KicksideApp(Adapter(db), refresh_seconds=60.0)))
        print(
            json.dumps(
                {
                    "rss_mb": round(status_mb("VmRSS"), 1),
                    "peak_rss_mb": round(status_mb("VmHWM"), 1),
                    "views": visits,
                }
            )
        )
    finally:
        db.dispose()


if __name__ == "__main__":
    main()
