"""The dashboard's job detail shows the job's workflow as a tree with each step's state, and
marks the job shown; ``waiting`` is a state of every view (Jobs filter, Queues columns)."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Static

from kickside_engine import Database, JobBuilder, Workflow
from kickside_tui.screens.jobs import JobsScreen
from kickside_tui.widgets.job_detail import JobDetailPane

from .fixtures import make_app, plain, settle


def test_job_detail_shows_the_workflow_tree_with_each_steps_state(db: Database) -> None:
    wf = Workflow("import-42")
    wf.add("fetch", JobBuilder("fetch", {}))
    wf.add("parse", JobBuilder("parse", {}), after=["fetch"])
    wf.add_many("thumb", [JobBuilder("thumb", {"i": i}) for i in range(3)], after=["parse"])
    inserted = wf.insert(db)
    app = make_app(db)

    async def scenario() -> None:
        async with app.run_test(size=(140, 70)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, JobsScreen)
            table = screen.query_one("#jobs", DataTable)
            rows = [str(row.value) for row in table.rows]
            assert set(rows) == {str(i) for i in inserted.jobs.values()}
            table.move_cursor(row=rows.index(str(inserted["parse"])))
            await settle(pilot)
            body = screen.query_one(JobDetailPane).query_one("#detail-body", Static)
            detail = plain(body.content)
            assert "state waiting" in detail
            assert "waiting_on_upstreams: waiting on 1 of 1 upstream jobs: fetch (available)" in (
                detail
            )
            assert "workflow import-42: pending (1 available, 4 waiting)" in detail
            assert "fetch available" in detail
            assert "parse waiting (waiting on 1 of 1)" in detail and "<- this job" in detail
            assert "thumb (3 jobs): 3 waiting" in detail

    asyncio.run(scenario())
