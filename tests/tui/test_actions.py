"""Actions driven by keys, checked in the database afterwards, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

from textual.widgets import Button, Checkbox, DataTable, Input, Static

from kickside_engine import Database, JobBuilder, JobState, RunOutcome, claim, get_job, record
from kickside_engine.control import (
    Actor,
    JobFilter,
    count_jobs,
    list_audit,
    list_jobs,
    list_queues,
    list_runs,
)
from kickside_engine.lifecycle import ExecutionResult, ResultKind
from kickside_engine.slots import RUNS_PER_CALL, disable_slot, enqueue_slot, wake_job
from kickside_tui.app import KicksideApp
from kickside_tui.screens.bulk import BulkScreen
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.screens.help import HelpScreen, help_text
from kickside_tui.screens.job_filter import FILTER_FIELDS
from kickside_tui.screens.leases import LeasesScreen
from kickside_tui.screens.purge import PurgeScreen

from .fixtures import (
    NOW,
    SCHEDULE,
    build_demo_data,
    make_app,
    pinned_clock,
    plain,
    settle,
    wait_until,
)

ME = Actor.current().user


def _app(db: Database) -> KicksideApp:
    # The real actor (Actor.current()), pinned clock.
    return make_app(db, clock=pinned_clock, schedule=SCHEDULE)


def _select(app: KicksideApp, table_id: str, key: str) -> None:
    table: DataTable[Any] = app.screen.query_one(table_id, DataTable)
    table.move_cursor(row=table.get_row_index(key))


def _audited(db: Database, action: str, target: str, *, via: str | None = None) -> bool:
    return any(
        e.action == action and e.actor == ME and (via is None or e.details.get("via") == via)
        for e in list_audit(db, target=target).entries
    )


def _state(db: Database, job_id: uuid.UUID) -> JobState | None:
    job = get_job(db, job_id)
    return job.state if job is not None else None


async def _filter(app: KicksideApp, pilot: Any, **values: str) -> None:
    for field in ("state", "queue", "worker", "tag", "search"):
        app.screen.query_one(f"#f-{field}", Input).value = values.get(field, "")
    app.screen.query_one("#f-state", Input).focus()
    await pilot.press("enter")
    await settle(pilot)


def test_job_actions_from_the_jobs_view(db: Database) -> None:
    ids = build_demo_data(db)
    first, second, third = ids.available
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            # Cancel asks first; "n" leaves the job alone.
            _select(app, "#jobs", str(first))
            await pilot.press("c")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            assert str(first) in plain(app.screen.query_one("#question", Static).content)
            await pilot.press("n")
            await settle(pilot)
            assert _state(db, first) is JobState.AVAILABLE
            await pilot.press("c")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            await pilot.press("y")
            await settle(pilot)
            assert _state(db, first) is JobState.CANCELLED
            assert _audited(db, "cancel", str(first))
            # Discard, confirmed with the button.
            _select(app, "#jobs", str(second))
            await pilot.press("d")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            await pilot.click("#yes")
            await settle(pilot)
            assert _state(db, second) is JobState.DISCARDED
            assert _audited(db, "discard", str(second))
            # Retry / run now needs no confirmation.
            _select(app, "#jobs", str(ids.retryable))
            await pilot.press("r")
            await settle(pilot)
            assert _state(db, ids.retryable) is JobState.AVAILABLE
            assert _audited(db, "retry", str(ids.retryable))
            # Wake a parked slot from the Jobs view.
            assert ids.parked_slot is not None
            _select(app, "#jobs", str(ids.parked_slot))
            await pilot.press("w")
            await settle(pilot)
            woken = get_job(db, ids.parked_slot)
            assert woken is not None and woken.state is JobState.AVAILABLE
            assert woken.control_pending
            assert _audited(db, "wake", str(ids.parked_slot))
            # Bulk cancel over the filter: the preview first, then the change.
            await _filter(app, pilot, state="available", queue="mailers")
            assert app.screen.query_one("#jobs", DataTable).row_count == 1
            dialog = await _open_bulk(app, pilot, "cancel")
            shown = await _previewed(pilot, dialog)
            assert "Bulk cancel 1 job(s) matching states=available queues=mailers" in shown
            await pilot.click("#bulk-apply")
            await settle(pilot)
            assert _state(db, third) is JobState.CANCELLED
            assert any(
                e.action == "bulk_cancel" and e.actor == ME
                for e in list_audit(db, action="bulk_cancel").entries
            )
            # Nothing left to cancel under this filter: nothing to apply.
            dialog = await _open_bulk(app, pilot, "cancel")
            assert "nothing to do" in await _previewed(pilot, dialog)
            assert dialog.query_one("#bulk-apply", Button).disabled
            await pilot.press("escape")
            await settle(pilot)
            assert not isinstance(app.screen, BulkScreen)
            # A refused action is reported, not fatal: a final job cannot be cancelled.
            await _filter(app, pilot, state="cancelled", queue="mailers")
            await pilot.press("c", "y")
            await settle(pilot)
            assert app.is_running

    asyncio.run(scenario())


def test_slot_actions_from_the_slots_view(db: Database) -> None:
    ids = build_demo_data(db)
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("3")
            await settle(pilot)
            # Park the due slot (asks first).
            assert ids.due_slot is not None
            _select(app, "#slots", str(ids.due_slot))
            await pilot.press("a", "y")
            await settle(pilot)
            assert _state(db, ids.due_slot) is JobState.PARKED
            assert _audited(db, "park", str(ids.due_slot))
            # Wake it again: due now.
            await pilot.press("w")
            await settle(pilot)
            assert _state(db, ids.due_slot) is JobState.AVAILABLE
            # Resume the disabled slot.
            assert ids.disabled_slot is not None
            _select(app, "#slots", str(ids.disabled_slot))
            await pilot.press("e")
            await settle(pilot)
            assert _state(db, ids.disabled_slot) is JobState.PARKED
            # Audited as `kickside resume` records it.
            assert _audited(db, "resume", str(ids.disabled_slot), via="enable")
            # Purge the parked slot: its run history and the row go.
            assert ids.parked_slot is not None
            _select(app, "#slots", str(ids.parked_slot))
            await pilot.press("x")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            await pilot.press("y")
            await wait_until(pilot, lambda: isinstance(app.screen, PurgeScreen), "purge dialog")
            purge = app.screen
            assert isinstance(purge, PurgeScreen)
            await wait_until(pilot, lambda: purge.finished, "the purge")
            assert purge.removed
            await pilot.press("escape")
            await settle(pilot)
            assert get_job(db, ids.parked_slot) is None
            assert any(  # audited under the slot's identity, one row per purge call
                e.action == "purge_slot"
                and e.actor == ME
                and e.target_type == "slot"
                and e.details.get("removed") == 1
                for e in list_audit(db, action="purge_slot").entries
            )
            # A running slot is kept: the purge waits for its lease.
            assert ids.running_slot is not None
            running = str(ids.running_slot)
            _select(app, "#slots", running)
            await pilot.press("x", "y")
            await wait_until(pilot, lambda: isinstance(app.screen, PurgeScreen), "purge dialog")
            waiting = app.screen
            assert isinstance(waiting, PurgeScreen)
            await wait_until(pilot, lambda: "lease release" in waiting.state, "the wait")
            await pilot.press("escape")
            await settle(pilot)
            assert _state(db, uuid.UUID(running)) is JobState.EXECUTING

    asyncio.run(scenario())


def test_queue_and_lease_actions(db: Database) -> None:
    ids = build_demo_data(db)
    app = _app(db)

    def paused() -> dict[str, bool]:
        return {q.name: q.paused for q in list_queues(db, NOW)}

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("7")
            await settle(pilot)
            _select(app, "#queues", "exports")
            await pilot.press("r")
            await settle(pilot)
            _select(app, "#queues", "mailers")
            await pilot.press("p")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            await pilot.press("y")
            await settle(pilot)
            assert paused() == {
                "default": False,
                "exports": False,
                "mailers": True,
                "reports": False,
            }
            assert _audited(db, "resume", "exports") and _audited(db, "pause", "mailers")
            # Cancel an executing job from the Leases view.
            await pilot.press("4")
            await settle(pilot)
            healthy = ids.executing[0]
            _select(app, "#leases", str(healthy))
            await pilot.press("c", "y")
            await settle(pilot)
            assert _state(db, healthy) is JobState.CANCELLED
            assert str(healthy) not in [
                str(k.value) for k in app.screen.query_one("#leases", DataTable).rows
            ]
            assert count_jobs(db, JobFilter(states=(JobState.EXECUTING,))) == 3

    asyncio.run(scenario())


def test_purge_shows_the_continuation_page_by_page(db: Database) -> None:
    runs = RUNS_PER_CALL + 5
    slot = JobBuilder("sync_tenant", {}).slot("tenants", "hooli", "sync", demand=True)
    job_id = enqueue_slot(db, slot, now=NOW).id
    for i in range(runs):
        at = NOW + timedelta(seconds=i)
        (claimed,) = claim(db, queue="default", node="n", now=at)
        record(db, [(claimed, ExecutionResult(ResultKind.DONE, at, 5, park=True))])
        if i + 1 < runs:
            wake_job(db, job_id, now=at)
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("3")
            await settle(pilot)
            _select(app, "#slots", str(job_id))
            await pilot.press("x", "y")
            await wait_until(pilot, lambda: isinstance(app.screen, PurgeScreen), "purge dialog")
            purge = app.screen
            assert isinstance(purge, PurgeScreen)
            await wait_until(pilot, lambda: purge.finished, "the purge")
            assert purge.removed and purge.calls == 2
            # A full page first, then the last call deletes the other 5 runs with the row: the
            # dialog adds both, so it shows every run that went.
            assert purge.deleted == runs
            shown = plain(purge.query_one("#progress", Static).content)
            assert f"runs deleted: {runs}\n" in shown and "calls: 2" in shown
            assert "removed" in shown
            await pilot.press("escape")
            await settle(pilot)
            assert get_job(db, job_id) is None and list_runs(db, job_id) == []

    asyncio.run(scenario())


def _ids(db: Database, flt: JobFilter) -> set[uuid.UUID]:
    return {job.id for job in list_jobs(db, flt, limit=500).jobs}


async def _type_filter(pilot: Any, **values: str) -> None:
    """Type each filter into its input with the keyboard (f, then tab from field to field)."""
    await pilot.press("f")
    for field in FILTER_FIELDS:
        if field != FILTER_FIELDS[0]:
            await pilot.press("tab")
        await pilot.press(*values.get(field, ""))
    await pilot.press("enter")
    await settle(pilot)


def _question(app: KicksideApp) -> str:
    return plain(app.screen.query_one("#question", Static).content)


async def _open_bulk(app: KicksideApp, pilot: Any, action: str | None) -> BulkScreen:
    """Press b (bulk) on the Jobs view and choose ``action`` in the dialog."""
    await pilot.press("b")
    await wait_until(pilot, lambda: isinstance(app.screen, BulkScreen), "the bulk dialog")
    dialog = app.screen
    assert isinstance(dialog, BulkScreen)
    if action is not None:
        await pilot.click(f"#bulk-{action}")
    return dialog


async def _previewed(pilot: Any, dialog: BulkScreen) -> str:
    """Wait for the dialog's preview; its text."""
    await wait_until(pilot, lambda: dialog.preview is not None, "the preview")
    return plain(dialog.query_one("#bulk-preview", Static).content)


def test_bulk_retry_over_the_filter_shows_the_preview_then_retries(db: Database) -> None:
    build_demo_data(db)
    failed_mail = JobFilter(states=(JobState.DISCARDED,), queues=("mailers",))
    targets = _ids(db, failed_mail)
    others = _ids(db, JobFilter(states=(JobState.DISCARDED,))) - targets
    assert len(targets) == 3 and others  # a discarded charge_card stays outside the filter
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            await _type_filter(pilot, state="discarded", queue="mailers")
            table = app.screen.query_one("#jobs", DataTable)
            assert {uuid.UUID(str(k.value)) for k in table.rows} == targets
            dialog = await _open_bulk(app, pilot, "retry")
            shown = await _previewed(pilot, dialog)
            assert "Bulk retry 3 job(s) matching states=discarded queues=mailers" in shown
            assert "a job arriving later is never touched" in shown
            assert count_jobs(db, failed_mail) == 3  # the preview wrote nothing
            await pilot.click("#bulk-apply")
            await settle(pilot)
            assert app.screen.query_one("#jobs", DataTable).row_count == 0

    asyncio.run(scenario())
    assert {_state(db, job_id) for job_id in targets} == {JobState.AVAILABLE}
    assert {_state(db, job_id) for job_id in others} == {JobState.DISCARDED}
    (entry,) = list_audit(db, action="bulk_retry").entries
    assert entry.actor == ME and {uuid.UUID(i) for i in entry.details["ids"]} == targets


def test_bulk_discard_over_a_worker_and_tag_filter(db: Database) -> None:
    ids = build_demo_data(db)
    mail = JobFilter(workers=("deliver_email",), tags=("mail",))
    completed_before = count_jobs(
        db, JobFilter(workers=("deliver_email",), states=(JobState.COMPLETED,))
    )
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            await _type_filter(pilot, worker="deliver_email", tag="mail")
            assert app.screen.query_one("#jobs", DataTable).row_count == count_jobs(db, mail)
            dialog = await _open_bulk(app, pilot, "discard")
            # Completed and discarded mail is final: only the three waiting jobs qualify.
            shown = await _previewed(pilot, dialog)
            assert "Bulk discard 3 job(s) matching workers=deliver_email tags=mail" in shown
            assert all(str(job_id)[-8:] in shown for job_id in ids.available)
            # The completed checkbox only means something for a retry.
            assert dialog.query_one("#bulk-completed", Checkbox).disabled
            await pilot.press("escape")  # declined: nothing changes
            await settle(pilot)
            assert {_state(db, i) for i in ids.available} == {JobState.AVAILABLE}
            dialog = await _open_bulk(app, pilot, "discard")
            await _previewed(pilot, dialog)
            dialog.query_one("#bulk-apply", Button).focus()
            await pilot.press("enter")
            await settle(pilot)

    asyncio.run(scenario())
    assert {_state(db, i) for i in ids.available} == {JobState.DISCARDED}
    assert (
        count_jobs(db, JobFilter(workers=("deliver_email",), states=(JobState.COMPLETED,)))
        == completed_before
    )
    assert count_jobs(db, JobFilter(states=(JobState.AVAILABLE,), queues=("reports",))) == 2
    (entry,) = list_audit(db, action="bulk_discard").entries
    assert {uuid.UUID(i) for i in entry.details["ids"]} == set(ids.available)


def test_park_from_the_jobs_view(db: Database) -> None:
    ids = build_demo_data(db)
    assert ids.due_slot is not None
    due = ids.due_slot
    oneshot = ids.available[0]
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            _select(app, "#jobs", str(due))
            await pilot.press("a")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            assert f"Park slot job {due}?" in _question(app)
            await pilot.press("y")
            await settle(pilot)
            # A one-shot job is not a slot: refused, and nothing changes.
            _select(app, "#jobs", str(oneshot))
            await pilot.press("a", "y")
            await settle(pilot)

    asyncio.run(scenario())
    parked = get_job(db, due)
    assert parked is not None and parked.state is JobState.PARKED
    assert not parked.demand_pending and not parked.control_pending
    assert _audited(db, "park", str(due))
    assert _state(db, oneshot) is JobState.AVAILABLE
    assert not _audited(db, "park", str(oneshot))


def test_discard_an_executing_job_from_the_leases_view(db: Database) -> None:
    ids = build_demo_data(db)
    healthy, expired = ids.executing
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("4")
            await settle(pilot)
            _select(app, "#leases", str(expired))
            await pilot.press("d")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            assert f"Discard executing job {expired}?" in _question(app)
            await pilot.press("y")
            await settle(pilot)
            keys = [str(k.value) for k in app.screen.query_one("#leases", DataTable).rows]
            assert str(expired) not in keys and str(healthy) in keys

    asyncio.run(scenario())
    assert _state(db, expired) is JobState.DISCARDED
    assert _state(db, healthy) is JobState.EXECUTING
    assert list_runs(db, expired)[-1].outcome is RunOutcome.DISCARDED  # its run is settled
    assert _audited(db, "discard", str(expired))


def test_read_only_leases_and_jobs_resume_change_nothing(db: Database) -> None:
    ids = build_demo_data(db)
    executing = JobFilter(states=(JobState.EXECUTING,))
    before = _ids(db, executing)
    audit_before = len(list_audit(db, limit=1000).entries)
    app = make_app(db, read_only=True, clock=pinned_clock, schedule=SCHEDULE)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("4")
            await settle(pilot)
            leases = app.screen
            assert isinstance(leases, LeasesScreen)
            _select(app, "#leases", str(ids.executing[0]))
            for action in ("cancel", "discard"):
                assert leases.check_action(action, ()) is None, action
            await pilot.press("c")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("d")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")  # an answer to no question does nothing either
            await settle(pilot)
            # Nor does resume on the Jobs view.
            await pilot.press("2")
            await settle(pilot)
            _select(app, "#jobs", str(ids.disabled_slot))
            assert app.screen.check_action("enable", ()) is None
            await pilot.press("e")
            await settle(pilot)

    asyncio.run(scenario())
    assert _state(db, ids.disabled_slot) is JobState.DISABLED  # type: ignore[arg-type]
    assert _ids(db, executing) == before and len(before) == 4
    assert len(list_audit(db, limit=1000).entries) == audit_before


def test_resume_a_disabled_slot_from_the_jobs_view(db: Database) -> None:
    ids = build_demo_data(db)
    assert ids.disabled_slot is not None and ids.parked_slot is not None
    disabled, parked, oneshot = ids.disabled_slot, ids.parked_slot, ids.available[0]
    # A second disabled slot with a wake waiting: resuming makes it due at once.
    woken = enqueue_slot(
        db, JobBuilder("sync_tenant", {}).slot("tenants", "hooli", "sync"), now=NOW
    ).id
    disable_slot(db, woken, now=NOW)
    wake_job(db, woken, now=NOW)
    assert _state(db, woken) is JobState.DISABLED
    audit_before = len(list_audit(db, limit=1000).entries)
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            resume = app.screen.active_bindings["e"]
            assert resume.enabled and resume.binding.show
            assert resume.binding.description == "Resume"
            footer = {
                (getattr(k, "key", ""), getattr(k, "description", ""))
                for k in app.screen.query("FooterKey")
            }
            assert ("e", "Resume") in footer
            # Neither a parked slot nor a one-shot job is disabled: nothing to resume.
            for job_id in (parked, oneshot):
                _select(app, "#jobs", str(job_id))
                await pilot.press("e")
                await settle(pilot)
            assert len(list_audit(db, limit=1000).entries) == audit_before
            _select(app, "#jobs", str(disabled))
            await pilot.press("e")
            await settle(pilot)
            _select(app, "#jobs", str(woken))
            await pilot.press("e")
            await settle(pilot)
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            assert "a park · e resume a disabled slot" in plain(help_text())

    asyncio.run(scenario())
    assert _state(db, parked) is JobState.PARKED
    assert _state(db, oneshot) is JobState.AVAILABLE
    assert _state(db, disabled) is JobState.PARKED  # no wake was pending
    assert _state(db, woken) is JobState.AVAILABLE
    assert _audited(db, "resume", str(disabled), via="enable")
    assert _audited(db, "resume", str(woken), via="enable")
    assert len(list_audit(db, limit=1000).entries) == audit_before + 2
