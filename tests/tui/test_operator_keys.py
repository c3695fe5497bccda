"""Issue 19.10: what operators know from k9s, Oban Web and Sidekiq.

j/k movement (Park moved to a), ``/`` filters, ``:`` jumps to a view, headers and ``s`` sort,
``y`` copies the id, the job's log tails live, and the command palette lists every action.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Input, Static

from kickside_engine import Database, JobState, claim, get_job, record
from kickside_engine.lifecycle import ExecutionResult, ResultKind
from kickside_tui.app import KicksideApp
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.screens.job import JobScreen
from kickside_tui.screens.jobs import JobsScreen
from kickside_tui.screens.jump import JumpScreen
from kickside_tui.screens.leases import LeasesScreen
from kickside_tui.screens.metrics import MetricsScreen

from .fixtures import (
    NOW,
    OPERATOR,
    SCHEDULE,
    build_demo_data,
    make_app,
    pinned_clock,
    plain,
    settle,
    wait_until,
)


def _app(db: Database) -> tuple[KicksideApp, list[str]]:
    """The app, and every notification it shows."""
    app = make_app(db, clock=pinned_clock, schedule=SCHEDULE, actor=OPERATOR)
    notices: list[str] = []
    real = app.notify

    def notify(message: str, **options: Any) -> None:
        notices.append(message)
        real(message, **options)

    app.notify = notify  # type: ignore[method-assign]
    return app, notices


def _keys(table: DataTable[Any]) -> list[str]:
    return [str(row.value) for row in table.rows]


def _column(table: DataTable[Any], column: str) -> list[str]:
    return [plain(table.get_cell(row, column)).strip() for row in table.rows]


async def _click_header(pilot: Any, table: DataTable[Any], column: str) -> None:
    x = 0
    for key, col in table.columns.items():
        if key.value == column:
            break
        x += col.get_render_width(table)
    await pilot.click(f"#{table.id}", offset=(x + 1, 0))
    await pilot.pause()


def test_j_and_k_move_and_park_is_on_a(db: Database) -> None:
    ids = build_demo_data(db)
    app, _ = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            jobs = app.screen.query_one("#jobs", DataTable)
            assert jobs.cursor_row == 0
            await pilot.press("j", "j", "j", "k")
            assert jobs.cursor_row == 2
            await pilot.press("3")
            await settle(pilot)
            slots = app.screen.query_one("#slots", DataTable)
            assert ids.due_slot is not None
            slots.move_cursor(row=slots.get_row_index(str(ids.due_slot)))
            await pilot.press("k")  # moves up: no longer parks
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            assert slots.cursor_row == slots.get_row_index(str(ids.due_slot)) - 1
            await pilot.press("j", "a")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            await pilot.press("y")
            await settle(pilot)

    asyncio.run(scenario())
    assert ids.due_slot is not None
    parked = get_job(db, ids.due_slot)
    assert parked is not None and parked.state is JobState.PARKED


def test_slash_filters_the_rows_and_focuses_the_jobs_search(db: Database) -> None:
    build_demo_data(db)
    app, _ = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await pilot.press("3")
            await settle(pilot)
            slots = app.screen.query_one("#slots", DataTable)
            assert slots.row_count == 5
            await pilot.press("slash")
            assert isinstance(app.focused, Input)
            await pilot.press(*"umbre")
            assert _column(slots, "scope") == ["umbrella"]
            await pilot.press("enter")  # keeps the filter, back to the rows
            assert app.focused is slots and slots.row_count == 1
            await pilot.press("slash", "escape")  # clears it
            assert app.focused is slots and slots.row_count == 5
            # The filter outlives a refresh: the next load is filtered as well.
            await pilot.press("slash", *"tenants", "enter")
            app.refresh_views()
            await settle(pilot)
            assert slots.row_count == 4
            # On the Jobs view, / is the search over the whole table.
            await pilot.press("2")
            await settle(pilot)
            await pilot.press("slash")
            assert isinstance(app.focused, Input) and app.focused.id == "f-search"

    asyncio.run(scenario())


def test_colon_jumps_to_a_view_by_name_or_to_a_job(db: Database) -> None:
    ids = build_demo_data(db)
    app, _ = _app(db)

    async def jump(pilot: Any, *keys: str) -> None:
        await pilot.press("colon")
        await wait_until(pilot, lambda: isinstance(app.screen, JumpScreen), "the prompt")
        await pilot.press(*keys)
        await settle(pilot)

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await settle(pilot)
            await jump(pilot, *"lea", "enter")
            assert isinstance(app.screen, LeasesScreen)
            await jump(pilot, *"doc", "tab")  # tab completes the name
            prompt = app.screen.query_one("#jump-input", Input)
            assert prompt.value == "doctor"
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, MetricsScreen)
            await jump(pilot, *"nope", "enter")  # not a view: says so, stays open
            assert isinstance(app.screen, JumpScreen)
            hint = plain(app.screen.query_one("#jump-hint", Static).content)
            assert "no view called 'nope'" in hint and "leases" in hint
            await pilot.press("escape")
            assert isinstance(app.screen, MetricsScreen)
            await jump(pilot, *f"job {ids.retryable}", "enter")
            await wait_until(pilot, lambda: isinstance(app.screen, JobScreen), "the job")
            await jump(pilot, *"jobs", "enter")
            assert isinstance(app.screen, JobsScreen)

    asyncio.run(scenario())


def test_headers_and_s_sort_jobs_slots_leases_and_queues(db: Database) -> None:
    ids = build_demo_data(db)
    expired = ids.executing[1]
    app, _ = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(140, 35)) as pilot:
            await pilot.press("4")
            await settle(pilot)
            leases = app.screen.query_one("#leases", DataTable)
            by_expiry = _keys(leases)
            assert by_expiry[0] == str(expired)
            await _click_header(pilot, leases, "worker")
            assert _column(leases, "worker") == sorted(_column(leases, "worker"))
            assert (
                str(leases.columns[next(k for k in leases.columns if k.value == "worker")].label)
                == "worker \u25b2"
            )
            await _click_header(pilot, leases, "worker")  # again: descending
            assert _column(leases, "worker") == sorted(_column(leases, "worker"), reverse=True)
            await _click_header(pilot, leases, "worker")  # a third time: the view's order
            assert _keys(leases) == by_expiry
            # Elapsed sorts by time, not by text ("1m10s" is longer than "44s").
            await _click_header(pilot, leases, "elapsed / max")
            await _click_header(pilot, leases, "elapsed / max")
            assert [e.split(" / ")[0] for e in _column(leases, "elapsed / max")] == [
                "1m10s",
                "44s",
                "30s",
                "20s",
            ]
            # s: from none the first column, again in reverse, then the next column.
            await _click_header(pilot, leases, "elapsed / max")
            await pilot.press("s")
            assert _keys(leases) == sorted(_keys(leases))
            await pilot.press("s")
            assert _keys(leases) == sorted(_keys(leases), reverse=True)
            await pilot.press("s")
            assert getattr(leases, "sort_column", None) == "worker"
            await pilot.press("s")
            assert _column(leases, "worker") == sorted(_column(leases, "worker"), reverse=True)
            # With Caps Lock on nothing happens: no capital sorts.
            await pilot.press("S")
            assert _column(leases, "worker") == sorted(_column(leases, "worker"), reverse=True)
            # The sort outlives a refresh.
            app.refresh_views()
            await settle(pilot)
            assert _column(leases, "worker") == sorted(_column(leases, "worker"), reverse=True)

            await pilot.press("3")
            await settle(pilot)
            slots = app.screen.query_one("#slots", DataTable)
            await _click_header(pilot, slots, "last run")  # oldest first, never-run last
            assert _column(slots, "last run") == ["4m59s ago", "44s ago", "never", "never", "never"]

            await pilot.press("7")
            await settle(pilot)
            queues = app.screen.query_one("#queues", DataTable)
            await _click_header(pilot, queues, "available")
            await _click_header(pilot, queues, "available")
            assert _keys(queues) == ["exports", "mailers", "default", "reports"]

            await pilot.press("2")
            await settle(pilot)
            jobs = app.screen.query_one("#jobs", DataTable)
            await _click_header(pilot, jobs, "state")
            states = _column(jobs, "state")
            assert states == sorted(states) and states[0] == "available"
            assert jobs.row_count == 45  # the page shown, sorted

    asyncio.run(scenario())


def test_y_copies_the_selected_id_and_says_so(db: Database) -> None:
    ids = build_demo_data(db)
    expired = ids.executing[1]
    app, notices = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await pilot.press("4")
            await settle(pilot)
            leases = app.screen.query_one("#leases", DataTable)
            leases.move_cursor(row=leases.get_row_index(str(expired)))
            await pilot.press("y")
            assert app.clipboard == str(expired)
            assert f"copied job id {expired}" in notices
            await pilot.press("2")
            await settle(pilot)
            jobs = app.screen.query_one("#jobs", DataTable)
            jobs.move_cursor(row=jobs.get_row_index(str(ids.retryable)))
            await settle(pilot)
            await pilot.press("z", "y")  # from the zoomed detail too
            assert app.clipboard == str(ids.retryable)
            await pilot.press("escape", "7")
            await settle(pilot)
            queues = app.screen.query_one("#queues", DataTable)
            queues.move_cursor(row=queues.get_row_index("mailers"))
            await pilot.press("y")
            assert app.clipboard == "mailers" and "copied queue mailers" in notices

    asyncio.run(scenario())


def test_the_job_log_tails_runs_errors_and_operator_actions_as_they_arrive(
    db: Database,
) -> None:
    ids = build_demo_data(db)
    app, _ = _app(db)

    def log(screen: JobScreen) -> str:
        text = plain(screen.query_one("#detail-body", Static).content)
        return text[text.index("Log (live)") : text.index("from the stored runs")]

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await settle(pilot)
            app.open_job(ids.retryable)
            await wait_until(pilot, lambda: isinstance(app.screen, JobScreen), "the job")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, JobScreen)
            before = log(screen)
            assert "job.insert sync_invoices on queue default" in before
            assert "job.start attempt 1 on web-1:4242:a1b2 (v2026.11.3), queued 2.0s" in before
            assert (
                "WARN  job.exception attempt 1 failed after 1.2s: RuntimeError: upstream "
                "503 from https://billing:[REDACTED]@api.example.com" in before
            )
            assert "operator.retry by oncall@ops-laptop" in before
            assert "s3cret" not in before
            assert before.index("attempt 1 failed") < before.index("job.start attempt 2")
            # An operator action from this screen shows up as it happens...
            await pilot.press("r")
            await settle(pilot)
            assert log(screen).count("operator.retry") == 2
            # ...and so does a pool's next attempt: its start, then its exception.
            (claimed,) = claim(
                db,
                queue="default",
                node="tail-node",
                now=NOW,
                workers=["sync_invoices"],
                code_version="v9",
            )
            app.refresh_views()
            await settle(pilot)
            assert "job.start attempt 3 on tail-node (v9)" in log(screen)
            record(
                db,
                [
                    (
                        claimed,
                        ExecutionResult(
                            ResultKind.ERROR,
                            NOW + timedelta(seconds=3),
                            3000,
                            error="KeyError: 'tenant'",
                        ),
                    )
                ],
            )
            app.refresh_views()
            await settle(pilot)
            tail = log(screen)
            assert "job.exception attempt 3 failed after 3.0s: KeyError: 'tenant'" in tail
            assert tail.rstrip().splitlines()[-1].startswith("14:05:03")

    asyncio.run(scenario())


def test_the_command_palette_lists_the_views_own_actions(db: Database) -> None:
    ids = build_demo_data(db)
    app, _ = _app(db)

    async def search(pilot: Any, text: str) -> dict[str, str]:
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), "palette")
        await pilot.press(*text)
        commands = app.screen.query_one(CommandList)
        await wait_until(pilot, lambda: commands.option_count > 0, "a match")
        await settle(pilot)
        hits = {}
        for i in range(commands.option_count):
            hit = commands.get_option_at_index(i).hit  # type: ignore[attr-defined]
            hits[plain(hit.text).strip()] = str(hit.help)
        return hits

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await pilot.press("4")
            await settle(pilot)
            leases = app.screen.query_one("#leases", DataTable)
            leases.move_cursor(row=leases.get_row_index(str(ids.executing[0])))
            hits = await search(pilot, "cancel")
            assert hits.get("Cancel") == "key c"
            await pilot.press("escape")
            await settle(pilot)
            hits = await search(pilot, "sort")
            assert hits.get("Sort (next column or direction)") == "key s"
            await pilot.press("escape")
            await settle(pilot)
            hits = await search(pilot, "copy")
            assert hits.get("Copy the id") == "key y"
            await pilot.press("escape")
            await pilot.press("2")
            await settle(pilot)
            hits = await search(pilot, "park")
            assert hits.get("Park") == "key a"
            await pilot.press("escape")
            await settle(pilot)
            # Choosing one runs it: cancel on the Leases view asks about the selected job.
            await pilot.press("4")
            await settle(pilot)
            await search(pilot, "cancel")
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            question = plain(app.screen.query_one("#question", Static).content)
            assert f"Cancel executing job {ids.executing[0]}?" in question
            await pilot.press("n")
            await settle(pilot)
            assert isinstance(app.screen, LeasesScreen)

    asyncio.run(scenario())
