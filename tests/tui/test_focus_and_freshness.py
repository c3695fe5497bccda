"""Issue 19.8: focus after zoom, action keys inside zoom, a doctor that says when it ran and
runs again on its own, a readable retry history, and enter on a job row opening that job."""

from __future__ import annotations

import asyncio
import io
import threading
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import DataTable, Input, Static

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job
from kickside_engine.control.health import HealthReport
from kickside_tui.adapter import Adapter
from kickside_tui.app import KicksideApp
from kickside_tui.screens import metrics
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.screens.job import JobScreen
from kickside_tui.screens.jobs import JobsScreen
from kickside_tui.screens.leases import LeasesScreen
from kickside_tui.screens.metrics import MetricsScreen
from kickside_tui.screens.slots import SlotsScreen
from kickside_tui.widgets.job_detail import JobDetailPane

from .fixtures import (
    CODE,
    NODE,
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


def _app(db: Database, **options: Any) -> KicksideApp:
    return make_app(db, clock=pinned_clock, schedule=SCHEDULE, actor=OPERATOR, **options)


async def _show_retryable(app: KicksideApp, pilot: Any) -> None:
    await pilot.press("2")
    await settle(pilot)
    state = app.screen.query_one("#f-state", Input)
    state.value = "retryable"
    state.focus()
    await pilot.press("enter")
    await settle(pilot)


def _detail_text(pane: JobDetailPane) -> str:
    """The detail as the pane shows it: wrapped at the pane's own width."""
    body = pane.query_one("#detail-body", Static)
    width = body.content_region.width
    assert width > 0
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(body.content)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_zoom_keeps_the_keys_on_the_job_and_escape_gives_the_list_back(db: Database) -> None:
    ids = build_demo_data(db)
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await _show_retryable(app, pilot)
            screen = app.screen
            assert isinstance(screen, JobsScreen)
            await pilot.press("z")
            pane = screen.query_one(JobDetailPane)
            assert screen.maximized is pane
            assert app.focused is pane, f"zoom focused {app.focused!r}"
            # An action key in zoom acts on the job shown: cancel asks about it.
            await pilot.press("c")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            question = plain(app.screen.query_one("#question", Static).content)
            assert f"Cancel job {ids.retryable}?" in question
            await pilot.press("n")
            await settle(pilot)
            assert app.screen is screen and screen.maximized is pane
            # Escape: back to the list, with the focus on it (not in a filter box)...
            await pilot.press("escape")
            await settle(pilot)
            assert screen.maximized is None
            assert app.focused is screen.query_one("#jobs", DataTable)
            # Enter on a row zooms too, and z comes back.
            await pilot.press("enter")
            assert screen.maximized is pane and app.focused is pane
            await pilot.press("z")
            assert screen.maximized is None
            assert app.focused is screen.query_one("#jobs", DataTable)
            # The next letter is an action, not a character typed into the search.
            await pilot.press("r")
            await settle(pilot)
            assert all(not box.value for box in screen.query(Input) if box.id != "f-state")
            # "/" in zoom leaves it: the search box it focuses is on screen.
            await pilot.press("z", "slash")
            await settle(pilot)
            assert screen.maximized is None
            assert isinstance(app.focused, Input) and app.focused.id == "f-search"

    asyncio.run(scenario())
    retried = get_job(db, ids.retryable)
    assert retried is not None and retried.state is JobState.AVAILABLE


@pytest.mark.parametrize("size", [(120, 35), (80, 24)], ids=["120x35", "80x24"])
def test_the_retry_history_is_readable_in_the_detail_pane(
    db: Database, size: tuple[int, int]
) -> None:
    build_demo_data(db)
    app = _app(db)

    async def scenario() -> None:
        async with app.run_test(size=size) as pilot:
            await _show_retryable(app, pilot)
            text = _detail_text(app.screen.query_one(JobDetailPane))
            history = text[text.index("Retry history") : text.index("Errors")]
            lines = [line.strip() for line in history.splitlines()]
            # Every fact of both attempts whole: outcome, start, duration, node, code, error.
            assert "#1  failed  13:50:00, took 1.2s" in lines
            assert "#2  failed  13:55:10, took 2.4s" in lines
            assert lines.count(f"on {NODE} · code {CODE}") == 2
            assert "TimeoutError: read timed out after 2.4s" in " ".join(lines)
            assert "\u2026" not in history, history

    asyncio.run(scenario())


class CountingAdapter(Adapter):
    """Counts the doctor's runs and the threads they ran on."""

    doctor_threads: list[threading.Thread]

    def health(self, now: datetime) -> HealthReport:
        self.doctor_threads.append(threading.current_thread())
        return super().health(now)


def test_the_doctor_says_when_it_ran_and_runs_again_on_its_own(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The schedule, not the machine's speed: a doctor slowed by a loaded machine would show
    # its run time and stretch its interval (both its own rules).
    monkeypatch.setattr(metrics, "SHOW_DOCTOR_TIME_FROM_S", float("inf"))
    monkeypatch.setattr(metrics, "DOCTOR_SLOWDOWN", 0)
    build_demo_data(db)
    clock = [NOW]
    adapter = CountingAdapter(db, clock=lambda: clock[0], schedule=SCHEDULE)
    adapter.doctor_threads = []
    app = KicksideApp(adapter, refresh_seconds=60.0)

    def doctor_text(screen: MetricsScreen) -> str:
        return " ".join(
            plain(screen.query_one(f"#{part}", Static).content)
            for part in ("doctor-status", "doctor")
        )

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await pilot.press("6")
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, MetricsScreen)
            await wait_until(pilot, lambda: len(adapter.doctor_threads) == 1, "the doctor")
            await settle(pilot)
            first = doctor_text(screen)
            assert "checked at 2026-11-30 14:05:00Z (now)" in first and "again in 30s" in first
            if not db.is_postgresql:
                assert "45 job row(s)" in first
            # A refresh within the interval reuses the report, saying how old it is.
            clock[0] = NOW + timedelta(seconds=10)
            app.refresh_views(auto=True)
            await settle(pilot)
            assert len(adapter.doctor_threads) == 1
            assert "(10s ago)" in doctor_text(screen) and "again in 20s" in doctor_text(screen)
            # Past the interval the next refresh runs it again, and it sees the new jobs.
            for i in range(5):
                enqueue(db, JobBuilder("fresh", {"n": i}), now=clock[0])
            clock[0] = NOW + timedelta(seconds=31)
            app.refresh_views(auto=True)
            await wait_until(pilot, lambda: len(adapter.doctor_threads) == 2, "the rerun")
            await settle(pilot)
            second = doctor_text(screen)
            assert "checked at 2026-11-30 14:05:31Z (now)" in second
            if not db.is_postgresql:
                assert "50 job row(s)" in second
            # Hidden, it does not run; shown again after the interval, it runs at once.
            await pilot.press("1")
            await settle(pilot)
            clock[0] = NOW + timedelta(seconds=100)
            app.refresh_views(auto=True)
            await settle(pilot)
            assert len(adapter.doctor_threads) == 2
            await pilot.press("6")
            await wait_until(pilot, lambda: len(adapter.doctor_threads) == 3, "the rerun")
            await settle(pilot)
            assert "checked at 2026-11-30 14:06:40Z" in doctor_text(screen)

    asyncio.run(scenario())
    # Off the UI thread, every time.
    assert all(t is not threading.main_thread() for t in adapter.doctor_threads)


def test_enter_on_a_lease_or_a_slot_opens_the_job(db: Database) -> None:
    ids = build_demo_data(db)
    expired = ids.executing[1]
    app = _app(db)

    async def opened(pilot: Any, table_id: str, job_id: uuid.UUID) -> JobScreen:
        table: DataTable[Any] = app.screen.query_one(table_id, DataTable)
        table.move_cursor(row=table.get_row_index(str(job_id)))
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, JobScreen), "the job")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobScreen) and screen.job_id == job_id
        text = plain(screen.query_one("#detail-body", Static).content)
        assert str(job_id) in text and "Log (live)" in text
        return screen

    async def scenario() -> None:
        async with app.run_test(size=(120, 35)) as pilot:
            await pilot.press("4")
            await settle(pilot)
            leases = app.screen
            assert isinstance(leases, LeasesScreen)
            job = await opened(pilot, "#leases", expired)
            assert "job.start attempt 1 on worker-2:977:c3d4" in plain(
                job.query_one("#detail-body", Static).content
            )
            # The job's actions work here too: discard asks about this job.
            await pilot.press("d")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            assert f"Discard job {expired}?" in plain(
                app.screen.query_one("#question", Static).content
            )
            await pilot.press("n")
            await settle(pilot)
            await pilot.press("escape")
            await settle(pilot)
            assert app.screen is leases
            assert app.focused is leases.query_one("#leases", DataTable)
            await pilot.press("3")
            await settle(pilot)
            assert isinstance(app.screen, SlotsScreen)
            assert ids.parked_slot is not None
            await opened(pilot, "#slots", ids.parked_slot)
            await pilot.press("escape")
            await settle(pilot)
            assert isinstance(app.screen, SlotsScreen)
            # Capacity: a job refused admission.
            await pilot.press("5")
            await settle(pilot)
            waiting: DataTable[Any] = app.screen.query_one("#waiting", DataTable)
            waiting.focus()
            first = uuid.UUID(str(next(iter(waiting.rows)).value))
            await opened(pilot, "#waiting", first)

    asyncio.run(scenario())
