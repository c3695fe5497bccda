"""The dashboard shows a running job's progress, redacted, on the Leases view and in its
detail, and follows it as it changes."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.widgets import DataTable, Static

from kickside_engine import Database, JobBuilder, claim, enqueue
from kickside_engine.store.progress import write_progress
from kickside_tui.screens.job import JobScreen
from kickside_tui.screens.leases import LeasesScreen

from .fixtures import make_app, plain, settle, wait_until


def test_the_leases_view_and_the_detail_follow_a_jobs_progress(db: Database) -> None:
    job_id = enqueue(db, JobBuilder("export", {})).id
    (claimed,) = claim(db, queue="default", node="worker-1")
    write_progress(db, node="worker-1", progress={claimed.lease_token: 0.25})
    app = make_app(db)

    def cell(screen: Any) -> str:
        table: DataTable[Any] = screen.query_one("#leases", DataTable)
        row = table.get_row(str(job_id))
        labels = [str(c.label) for c in table.columns.values()]
        return plain(row[labels.index("progress")]).strip()

    async def scenario() -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("4")
            await settle(pilot)
            leases = app.screen
            assert isinstance(leases, LeasesScreen)
            assert cell(leases) == "25%"
            progress = {"fraction": 0.5, "rows": 500, "token": "s3cret"}
            write_progress(db, node="worker-1", progress={claimed.lease_token: progress})
            await pilot.press("g")
            await settle(pilot)
            shown = cell(leases)
            assert shown.startswith('50% {"rows": 500') and "s3cret" not in shown
            table: DataTable[Any] = leases.query_one("#leases", DataTable)
            table.move_cursor(row=table.get_row_index(str(job_id)))
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, JobScreen), "the job")
            await settle(pilot)
            detail = plain(app.screen.query_one("#detail-body", Static).content)
            assert 'progress 50% {"rows": 500, "token": "[REDACTED]"}' in detail
            assert "s3cret" not in detail

    asyncio.run(scenario())
