"""Switching views does not pile up watchers on the footer (a Textual leak the soak found)."""

from __future__ import annotations

import asyncio

from kickside_engine import Database
from kickside_tui.widgets.footer import Footer

from .fixtures import build_demo_data, demo_adapter_kwargs, make_app, settle


def _watchers(footer: Footer) -> int:
    return sum(len(entries) for entries in getattr(footer, "__watchers", {}).values())


def test_view_switches_leave_no_stale_footer_watchers(db: Database) -> None:
    build_demo_data(db)
    app = make_app(db, **demo_adapter_kwargs())

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            seen: dict[str, int] = {}
            for _ in range(4):
                for key in "1234567":
                    await pilot.press(key)
                    await settle(pilot)
                    footer = app.screen.query_one(Footer)
                    keys = len(footer.children) + sum(len(c.children) for c in footer.children)
                    count = _watchers(footer)
                    assert count <= keys, f"view {key}: {count} watchers for {keys} widgets"
                    seen[key] = count
            assert all(seen.values())  # the footer does bind its keys' watchers

    asyncio.run(scenario())
