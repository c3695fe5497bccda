"""The dashboard's job detail shows a job's result, redacted as its args are."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Static

from kickside_engine import Database, JobBuilder, enqueue
from kickside_engine.testing import drain_jobs
from kickside_tui.screens.jobs import JobsScreen
from kickside_tui.widgets.job_detail import JobDetailPane

from ..support import results_app
from .fixtures import make_app, plain, settle


def test_job_detail_shows_the_result_redacted(db: Database) -> None:
    job_id = enqueue(db, JobBuilder("secret_result", {})).id
    drain_jobs(db, results_app.registry)
    app = make_app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 60)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, JobsScreen)
            table = screen.query_one("#jobs", DataTable)
            assert [str(row.value) for row in table.rows] == [str(job_id)]
            body = screen.query_one(JobDetailPane).query_one("#detail-body", Static)
            detail = plain(body.content)
            assert "Result" in detail and '"user": "ada"' in detail
            assert '"password": "[REDACTED]"' in detail and "hunter2" not in detail

    asyncio.run(scenario())
