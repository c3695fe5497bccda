"""The Capacity view shows rate limits: each group's starts this window against its rate, each
key's against the per-key rate, and the jobs a rate holds back, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from textual.widgets import DataTable

from kickside_engine import Database, JobBuilder, claim, enqueue
from kickside_engine.control import Actor
from kickside_engine.control.capacity import set_capacity
from kickside_engine.workers import CapacityDeclaration

from .fixtures import make_app, settle

T = datetime(2030, 1, 1, 13, 4, 30, tzinfo=UTC)
STRIPE = CapacityDeclaration(group="stripe", settings_namespace="app.stripe")


def _column(table: DataTable[Any], column: str) -> list[str]:
    return [str(table.get_cell(row, column)) for row in table.rows]


def test_the_capacity_view_shows_starts_against_each_rate(db: Database) -> None:
    set_capacity(
        db,
        "app.stripe",
        global_limit=10,
        per_key_limit=10,
        rate_limit="3/min",
        rate_limit_per_key="2/min",
        actor=Actor("ops", "laptop"),
        now=T,
        create=True,
    )
    for key in ("acct-1", "acct-1", "acct-1", "acct-2", "acct-3"):
        enqueue(db, JobBuilder("ok", {}, capacity=STRIPE).concurrency_key(key))
    assert len(claim(db, queue="default", node="n1", limit=10, now=T)) == 3
    app = make_app(db, clock=lambda: T)

    async def scenario() -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            await settle(pilot)
            await pilot.press("5")
            await settle(pilot)
            groups = app.screen.query_one("#groups", DataTable)
            assert _column(groups, "rate") == ["3/3 /min"]
            assert _column(groups, "key rate") == ["2/min"]
            assert "rate_limit, rate_limit_per_key" in _column(groups, "settings")[0]
            keys = app.screen.query_one("#keys", DataTable)
            assert _column(keys, "concurrency key") == ["acct-1", "acct-2"]
            assert _column(keys, "rate") == ["2/2 /min", "1/2 /min"]
            waiting = app.screen.query_one("#waiting", DataTable)
            assert (
                _column(waiting, "reason")
                == ["rate for the group reached (3/3 this minute), next admission at 13:05:00 UTC"]
                * 2
            )

    asyncio.run(scenario())
