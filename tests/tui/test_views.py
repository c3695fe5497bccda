"""Every view of the dashboard over the demo data, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Input, Static

from kickside_engine import Database, JobBuilder, enqueue
from kickside_engine.control import JobFilter, list_jobs
from kickside_tui.screens.help import HelpScreen
from kickside_tui.screens.jobs import JobsScreen
from kickside_tui.screens.leases import LeasesScreen
from kickside_tui.screens.metrics import MetricsScreen
from kickside_tui.widgets.chrome import Banner
from kickside_tui.widgets.job_detail import JobDetailPane

from .fixtures import (
    NODE,
    NOW,
    STALE_NODE,
    build_demo_data,
    demo_adapter_kwargs,
    make_app,
    plain,
    settle,
    wait_until,
)


def _keys(table: DataTable[Any]) -> list[str]:
    return [str(row.value) for row in table.rows]


def _column(table: DataTable[Any], column: str) -> list[str]:
    return [str(table.get_cell(row, column)) for row in table.rows]


def _text(widget: Static) -> str:
    return plain(widget.content)


def test_every_view_shows_its_data(db: Database) -> None:
    ids = build_demo_data(db)
    app = make_app(db, **demo_adapter_kwargs())

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            screen = app.screen
            assert not screen.query_one(Banner).shown
            queues = screen.query_one("#queues", DataTable)
            assert _keys(queues) == ["default", "exports", "mailers", "reports"]
            assert _column(queues, "paused") == ["no", "paused", "no", "no"]
            attention = _text(screen.query_one("#attention", Static))
            assert "1 expired lease(s) not yet rescued" in attention
            assert "no node runs queue(s): reports" in attention
            assert "2 job(s) waiting on capacity admission" in attention

            await pilot.press("2")
            await settle(pilot)
            jobs = app.screen.query_one("#jobs", DataTable)
            assert jobs.row_count == 45
            assert "available" in _column(jobs, "state")

            await pilot.press("3")
            await settle(pilot)
            slots = app.screen.query_one("#slots", DataTable)
            assert _column(slots, "key") == ["poll", "sync", "sync", "sync", "sync"]
            states = _column(slots, "state")
            assert states == ["scheduled", "parked", "available due", "disabled", "executing"]
            assert str(ids.parked_slot) in _keys(slots)

            await pilot.press("4")
            await settle(pilot)
            leases = app.screen.query_one("#leases", DataTable)
            assert leases.row_count == 4
            assert _column(leases, "lease expires")[0] == "expired 40s ago"
            # At 120 columns the import's progress takes the place of the code versions (which
            # a wider terminal shows: test_narrow); a job without progress shows none.
            assert _column(leases, "progress") == ["", '42% {"rows": 4200}', "", ""]

            await pilot.press("5")
            await settle(pilot)
            groups = app.screen.query_one("#groups", DataTable)
            assert _keys(groups) == ["exports"]
            waiting = app.screen.query_one("#waiting", DataTable)
            reasons = _column(waiting, "reason")
            assert reasons[0] == "limit for concurrency key 'acme' reached (1/1)"

            await pilot.press("6")
            await settle(pilot)
            metrics = app.screen
            assert isinstance(metrics, MetricsScreen)
            assert _keys(metrics.query_one("#latency", DataTable)) == [
                "default",
                "exports",
                "mailers",
                "reports",
            ]
            doctor = _text(metrics.query_one("#doctor", Static))
            assert "schema" in doctor and "warn nodes" in doctor
            audit = metrics.query_one("#audit", DataTable)
            assert _column(audit, "action")[:2] == ["pause", "capacity_set"]

            await pilot.press("7")
            await settle(pilot)
            ops = app.screen
            assert _column(ops.query_one("#queues", DataTable), "state") == [
                "running",
                "paused",
                "running",
                "no node",
            ]
            nodes = ops.query_one("#nodes", DataTable)
            assert _keys(nodes) == sorted([NODE, STALE_NODE])
            # The live node publishes its kinds; the stale one, an older pool, did not.
            assert dict(zip(_keys(nodes), _column(nodes, "executors"), strict=True)) == {
                NODE: "process 1/16, async 37/100",
                STALE_NODE: "process 0/4",
            }
            cron = ops.query_one("#cron", DataTable)
            # No --schedule: what the live node publishes (the stale node's does not count).
            assert _column(cron, "entry") == ["cleanup", "weekly_digest"]
            assert _column(cron, "nodes") == [NODE, NODE]
            assert _column(cron, "job") == ["cleanup (default)", "digest (default)"]
            assert _column(cron, "last run")[0] == "14:00:00 (5m00s ago)"

    asyncio.run(scenario())


def test_jobs_filter_search_and_detail(db: Database) -> None:
    ids = build_demo_data(db)
    app = make_app(db, **demo_adapter_kwargs())

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            await pilot.press("f")
            assert isinstance(app.focused, Input) and app.focused.id == "f-state"
            app.focused.value = "retryable"
            await pilot.press("enter")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, JobsScreen)
            table = screen.query_one("#jobs", DataTable)
            assert _keys(table) == [str(ids.retryable)]
            detail = _text(screen.query_one(JobDetailPane).query_one("#detail-body", Static))
            assert "retry_backoff" in detail
            assert "TimeoutError: read timed out" in detail
            assert "[REDACTED]" in detail and "s3cret" not in detail
            assert "account:42" in detail
            # Clear the state, search the errors instead: a case-insensitive substring.
            screen.query_one("#f-state", Input).value = ""
            await pilot.press("slash", *"UPSTREAM 503", "enter")
            await settle(pilot)
            assert _keys(table) == [str(ids.retryable)]
            screen.query_one("#f-search", Input).value = ""
            await pilot.press("f")
            screen.query_one("#f-state", Input).value = "nonsense"
            await pilot.press("enter")
            await settle(pilot)
            assert _keys(table) == [str(ids.retryable)], "a bad filter keeps the old one"

    asyncio.run(scenario())


def test_jobs_filter_by_worker_and_by_tag(db: Database) -> None:
    ids = build_demo_data(db)
    app = make_app(db, **demo_adapter_kwargs())

    def rows() -> list[str]:
        return _keys(app.screen.query_one("#jobs", DataTable))

    async def typed(pilot: Any, worker: str = "", tag: str = "") -> list[str]:
        """Type the worker and tag filters (f, then tab to each field), apply, read the rows."""
        await pilot.press("f", "tab", "tab")  # state, queue, worker
        await pilot.press("ctrl+u", *worker, "tab", "ctrl+u", *tag, "enter")
        await settle(pilot)
        return rows()

    async def entered(pilot: Any, worker: str = "", tag: str = "") -> list[str]:
        """The same, with the values set at once (typing costs ~80 ms a key)."""
        app.screen.query_one("#f-worker", Input).value = worker
        app.screen.query_one("#f-tag", Input).value = tag
        app.screen.query_one("#f-worker", Input).focus()
        await pilot.press("enter")
        await settle(pilot)
        return rows()

    def matching(**flt: Any) -> set[str]:
        return {str(job.id) for job in list_jobs(db, JobFilter(**flt), limit=500).jobs}

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            table = app.screen.query_one("#jobs", DataTable)
            assert table.row_count == 45
            reports = await typed(pilot, worker="render_report")
            assert len(reports) == 2 and set(reports) == matching(workers=("render_report",))
            assert _column(table, "worker") == ["render_report"] * 2
            assert _column(table, "queue") == ["reports"] * 2
            mail = await typed(pilot, tag="mail")
            assert len(mail) == 27 and set(mail) == matching(tags=("mail",))
            # Worker and tag together: both must hold.
            (one,) = await typed(pilot, worker="deliver_email", tag="user:103")
            assert one in mail
            assert "workers=deliver_email tags=user:103" in _text(
                app.screen.query_one("#status", Static)
            )
            assert await entered(pilot, worker="render_report", tag="mail") == []
            # Several workers, comma-separated: either one; a tag alone.
            both = await entered(pilot, worker="render_report, charge_card")
            assert len(both) == 3 and set(reports) < set(both)
            assert await entered(pilot, tag="account:42") == [str(ids.retryable)]
            assert len(await entered(pilot)) == 45  # cleared: every job again

    asyncio.run(scenario())


def test_jobs_pages_with_next_and_previous(db: Database) -> None:
    for i in range(120):
        enqueue(db, JobBuilder("page_me", {"n": i}), now=NOW)
    app = make_app(db, clock=lambda: NOW)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            table = app.screen.query_one("#jobs", DataTable)
            first = _keys(table)
            assert len(first) == 50
            await pilot.press("n")
            await settle(pilot)
            second = _keys(table)
            await pilot.press("n")
            await settle(pilot)
            third = _keys(table)
            assert len(second) == 50 and len(third) == 20
            assert not set(first) & set(second) and not set(second) & set(third)
            await pilot.press("n")  # the last page stays
            await settle(pilot)
            assert _keys(table) == third
            await pilot.press("p", "p")
            await settle(pilot)
            assert _keys(table) == first
            status = _text(app.screen.query_one("#status", Static))
            assert "120 match" in status

    asyncio.run(scenario())


def test_command_palette_help_and_zoom(db: Database) -> None:
    app = make_app(db, clock=lambda: NOW)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press("ctrl+p")
            await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), "palette")
            await pilot.press(*"leases")
            await wait_until(
                pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "a match"
            )
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, LeasesScreen), "leases")
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            assert isinstance(app.screen, LeasesScreen)
            await pilot.press("2")
            await settle(pilot)
            await pilot.press("z")
            assert app.screen.maximized is app.screen.query_one(JobDetailPane)
            await pilot.press("escape")
            assert app.screen.maximized is None

    asyncio.run(scenario())
