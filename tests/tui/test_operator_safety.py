"""Issue 19.1 and 19.6 in the dashboard, on SQLite and PostgreSQL: no keystroke re-runs finished
work (bulk actions over no filter, completed jobs, jobs arriving after the preview, Caps Lock),
and a slot purge clears the slot's wakes and shows as pending until it is done.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from textual.widgets import Button, DataTable, Input, Static

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, JobFilter, discard_job, list_audit, list_jobs
from kickside_engine.plugins.lifeline import rescue_expired
from kickside_engine.purge import purge_request
from kickside_tui.app import KicksideApp
from kickside_tui.screens.bulk import BulkScreen
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.screens.purge import PurgeScreen
from kickside_tui.widgets.job_detail import JobDetailPane

from .fixtures import NOW, SCHEDULE, build_demo_data, make_app, pinned_clock, plain, settle
from .fixtures import wait_until as wait_for_ui

BOB = Actor("bob", "ops-2")


def _app(db: Database) -> KicksideApp:
    return make_app(db, clock=pinned_clock, schedule=SCHEDULE)


def _ids(db: Database, flt: JobFilter) -> set[uuid.UUID]:
    return {job.id for job in list_jobs(db, flt, limit=1000).jobs}


def _states(db: Database) -> dict[uuid.UUID, JobState]:
    return {job.id: job.state for job in list_jobs(db, JobFilter(), limit=1000).jobs}


def _toasts(app: KicksideApp) -> str:
    return "\n".join(n.message for n in app._notifications)


async def _bulk_dialog(app: KicksideApp, pilot: Any, action: str) -> BulkScreen:
    await pilot.press("b")
    await wait_for_ui(pilot, lambda: isinstance(app.screen, BulkScreen), "the bulk dialog")
    dialog = app.screen
    assert isinstance(dialog, BulkScreen)
    await pilot.click(f"#bulk-{action}")
    return dialog


def _shown(dialog: BulkScreen) -> str:
    return plain(dialog.query_one("#bulk-preview", Static).content)


def _apply_disabled(dialog: BulkScreen) -> bool:
    return dialog.query_one("#bulk-apply", Button).disabled


def test_no_filter_needs_all_and_the_typed_count_and_completed_jobs_are_never_retried(
    db: Database,
) -> None:
    build_demo_data(db)
    completed = _ids(db, JobFilter(states=(JobState.COMPLETED,)))
    charge_card = _ids(db, JobFilter(workers=("charge_card",)))
    assert completed and charge_card
    app = _app(db)
    late: list[uuid.UUID] = []
    previewed: list[uuid.UUID] = []

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            before = _states(db)
            # Caps Lock on: capitals start nothing, and the toast says why.
            await pilot.press("R", "C", "D")
            await settle(pilot)
            assert not isinstance(app.screen, BulkScreen | ConfirmScreen)
            assert "Caps Lock" in _toasts(app) and _states(db) == before
            dialog = await _bulk_dialog(app, pilot, "retry")
            await wait_for_ui(pilot, lambda: "All jobs" in _shown(dialog), "the refusal")
            assert dialog.preview is None and _apply_disabled(dialog)
            assert "EVERY job" in plain(dialog.query_one("#bulk-filter", Static).content)
            await pilot.click("#bulk-all")
            await wait_for_ui(pilot, lambda: dialog.preview is not None, "the preview")
            preview = dialog.preview
            assert preview is not None and preview.all_jobs
            assert preview.completed_excluded == len(completed)
            shown = _shown(dialog)
            assert f"Bulk retry {preview.count} job(s) matching every job" in shown
            assert f"{len(completed)} completed job(s) left out" in shown
            assert f"type {preview.count} below" in shown and _apply_disabled(dialog)
            previewed.extend(preview.job_ids())
            # A job fails after the preview: it is not part of what was previewed.
            late.append(enqueue(db, JobBuilder("charge_card", {"order": 8})).id)
            discard_job(db, late[0], BOB, utcnow())
            typed = dialog.query_one("#bulk-typed", Input)
            assert typed.display
            # The dialog focuses the typed count once the preview is laid out (after a refresh).
            await wait_for_ui(pilot, lambda: typed.has_focus, "the typed count's focus")
            await pilot.press("1", "enter")  # the wrong count: nothing happens
            await settle(pilot)
            assert isinstance(app.screen, BulkScreen) and _apply_disabled(dialog)
            typed.value = ""
            await pilot.press(*str(preview.count))
            assert not _apply_disabled(dialog)
            await pilot.press("enter")
            await settle(pilot)
            assert not isinstance(app.screen, BulkScreen)
            assert f"bulk retry: {preview.count} changed" in _toasts(app)

    asyncio.run(scenario())
    states = _states(db)
    assert {states[i] for i in completed} == {JobState.COMPLETED}  # none ran again
    assert states[late[0]] is JobState.DISCARDED  # arrived after the preview
    assert {states[i] for i in charge_card} == {JobState.AVAILABLE}  # the previewed one
    entries = list_audit(db, action="bulk_retry").entries
    assert sorted(uuid.UUID(i) for e in entries for i in e.details["ids"]) == sorted(previewed)
    assert all(e.details["all_jobs"] and not e.details["include_completed"] for e in entries)


def test_completed_jobs_are_retried_only_when_ticked_and_large_sets_need_the_count(
    db: Database,
) -> None:
    build_demo_data(db)
    mail_done = _ids(db, JobFilter(queues=("mailers",), states=(JobState.COMPLETED,)))
    big = [enqueue(db, JobBuilder("render_report", {"n": n}).queue("big")).id for n in range(101)]
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            jobs = app.screen
            jobs.query_one("#f-queue", Input).value = "mailers"
            jobs.query_one("#f-queue", Input).focus()
            await pilot.press("enter")
            await settle(pilot)
            dialog = await _bulk_dialog(app, pilot, "retry")
            await wait_for_ui(pilot, lambda: dialog.preview is not None, "the preview")
            first = dialog.preview
            assert first is not None and first.completed_excluded == len(mail_done)
            assert not first.include_completed
            await pilot.click("#bulk-completed")
            await wait_for_ui(
                pilot,
                lambda: dialog.preview is not None and dialog.preview.include_completed,
                "the preview with completed jobs",
            )
            assert dialog.preview is not None
            assert dialog.preview.count == first.count + len(mail_done)
            assert not _apply_disabled(dialog)  # a few jobs: the Apply button is enough
            await pilot.click("#bulk-apply")
            await settle(pilot)
            # A large set: the count must be typed.
            jobs.query_one("#f-queue", Input).value = "big"
            jobs.query_one("#f-queue", Input).focus()
            await pilot.press("enter")
            await settle(pilot)
            dialog = await _bulk_dialog(app, pilot, "cancel")
            await wait_for_ui(pilot, lambda: dialog.preview is not None, "the preview")
            assert "more than 100 jobs: type 101 below" in _shown(dialog)
            assert _apply_disabled(dialog)
            await pilot.press("1", "0", "1", "enter")
            await settle(pilot)

    asyncio.run(scenario())
    states = _states(db)
    assert {states[i] for i in mail_done} == {JobState.AVAILABLE}  # asked for: ticked
    assert {states[i] for i in big} == {JobState.CANCELLED}
    (retry,) = list_audit(db, action="bulk_retry").entries
    assert retry.details["include_completed"] is True


def test_a_purge_clears_the_wakes_and_shows_as_pending_until_done(db: Database) -> None:
    ids = build_demo_data(db)
    running = ids.running_slot
    assert running is not None
    slot = get_job(db, running)
    assert slot is not None and slot.state is JobState.EXECUTING and slot.demand_pending
    app = _app(db)

    def row_state(key: str) -> str:
        table: DataTable[Any] = app.screen.query_one("#slots", DataTable)
        return plain(table.get_row(key)[3])

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("3")
            await settle(pilot)
            table: DataTable[Any] = app.screen.query_one("#slots", DataTable)
            table.move_cursor(row=table.get_row_index(str(running)))
            await pilot.press("x")
            await wait_for_ui(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            assert "wakes are cleared" in plain(app.screen.query_one("#question", Static).content)
            await pilot.press("y")
            await wait_for_ui(pilot, lambda: isinstance(app.screen, PurgeScreen), "purge")
            dialog = app.screen
            assert isinstance(dialog, PurgeScreen)
            await wait_for_ui(pilot, lambda: "lease release" in dialog.state, "the wait")
            assert "runs no more" in dialog.state
            await pilot.press("escape")  # stopped early: the purge stays pending
            await settle(pilot)
            current = get_job(db, running)
            assert current is not None and not current.demand_pending
            assert purge_request(current.meta) is not None
            await wait_for_ui(pilot, lambda: "purging" in row_state(str(running)), "the mark")
            status = plain(app.screen.query_one("#status", Static).content)
            assert "1 purge(s) pending" in status
            # The job detail says so too.
            await pilot.press("2")
            await settle(pilot)
            jobs: DataTable[Any] = app.screen.query_one("#jobs", DataTable)
            jobs.move_cursor(row=jobs.get_row_index(str(running)))
            await wait_for_ui(
                pilot,
                lambda: (
                    "purge pending since"
                    in plain(
                        app.screen.query_one(JobDetailPane)
                        .query_one("#detail-body", Static)
                        .content
                    )
                ),
                "the purge in the job detail",
            )
            # The run is lost (its lease expires): the Lifeline parks it instead of running it
            # again, and the next purge finishes.
            rescue_expired(db, NOW + timedelta(minutes=5))
            rescued = get_job(db, running)
            assert rescued is not None and rescued.state is JobState.PARKED
            await pilot.press("3")
            await settle(pilot)
            table = app.screen.query_one("#slots", DataTable)
            table.move_cursor(row=table.get_row_index(str(running)))
            await pilot.press("x", "y")
            await wait_for_ui(pilot, lambda: isinstance(app.screen, PurgeScreen), "purge")
            again = app.screen
            assert isinstance(again, PurgeScreen)
            await wait_for_ui(pilot, lambda: again.finished, "the purge")
            assert again.removed
            await pilot.press("escape")
            await settle(pilot)

    asyncio.run(scenario())
    assert get_job(db, running) is None
    entries = list_audit(db, action="purge_slot").entries  # one per purge, not one per poll
    assert [e.details["outcome"] for e in entries] == ["removed", "stopped"]
