"""Read-only mode, database outages and the reconnect backoff, and the live refresh."""

from __future__ import annotations

import asyncio
import random
import re
import time
from typing import Any

import pytest
from textual.widgets import DataTable

from kickside_engine import Database, JobBuilder, JobState, enqueue_many, get_job
from kickside_engine.control import list_audit, list_queues
from kickside_engine.store.reconnect import backoff_seconds
from kickside_tui.adapter import Adapter, ReadOnlyError
from kickside_tui.reconnect import Reconnect
from kickside_tui.screens.base import ViewScreen, describe_retry
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.widgets.chrome import Banner, ViewBar

from ..conftest import PG_URL, Target
from ..support.tcp_proxy import Proxy
from .fixtures import NOW, build_demo_data, demo_adapter_kwargs, make_app, plain, settle, wait_until


def test_read_only_refuses_every_action(db: Database) -> None:
    ids = build_demo_data(db)
    audit_before = len(list_audit(db, limit=1000).entries)
    app = make_app(db, read_only=True, **demo_adapter_kwargs())
    first = ids.available[0]

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "read-only" in app.sub_title
            assert "READ-ONLY" in plain(app.screen.query_one(ViewBar).render())
            await pilot.press("2")
            await settle(pilot)
            jobs = app.screen
            table = jobs.query_one("#jobs")
            table.move_cursor(row=table.get_row_index(str(first)))  # type: ignore[attr-defined]
            for action in ("cancel", "discard", "retry", "wake", "park", "bulk"):
                assert jobs.check_action(action, ()) is None, action
            await pilot.press("c", "d", "r", "w", "a", "C", "R", "D")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("3")
            await settle(pilot)
            await pilot.press("w", "a", "e", "x")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.press("7")
            await settle(pilot)
            await pilot.press("p", "r")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)

    asyncio.run(scenario())
    assert get_job(db, first).state is JobState.AVAILABLE  # type: ignore[union-attr]
    assert {q.name: q.paused for q in list_queues(db, NOW)}["exports"] is True
    assert len(list_audit(db, limit=1000).entries) == audit_before
    adapter = Adapter(db, read_only=True)
    with pytest.raises(ReadOnlyError):
        adapter.cancel(first, NOW)
    with pytest.raises(ReadOnlyError):
        adapter.pause_queue("default", NOW)
    assert get_job(db, first).state is JobState.AVAILABLE  # type: ignore[union-attr]


def test_reconnect_backs_off_exponentially_to_a_cap_with_jitter_and_starts_over() -> None:
    assert [backoff_seconds(n, 1.0, 15.0) for n in range(1, 8)] == [1, 2, 4, 8, 15, 15, 15]
    assert backoff_seconds(3, 60.0, 15.0) == 60.0  # a refresh slower than the cap stays
    assert backoff_seconds(10_000, 0.2, 15.0) == 15.0
    reconnect = Reconnect(rng=random.Random(3))
    assert not reconnect.waiting and reconnect.remaining() == 0.0

    def scheduled_try_fails() -> float:
        reconnect.retrying()
        delay = reconnect.failed(0.5)
        assert delay is not None
        return delay

    delays = [reconnect.failed(0.5)]
    retry_at = reconnect.retry_at
    assert reconnect.failed(0.5) is None, "a try in between (a key) leaves the schedule alone"
    assert (reconnect.failures, reconnect.retry_at) == (2, retry_at)
    assert reconnect.delays_seconds == delays
    delays += [scheduled_try_fails() for _ in range(7)]
    assert reconnect.waiting and reconnect.failures == 9 and reconnect.delays_seconds == delays
    nominal = [0.5, 1, 2, 4, 8, 15, 15, 15]
    for delay, top in zip(delays, nominal, strict=True):
        assert top * (1 - reconnect.jitter) <= delay <= top
    assert len({round(d / top, 6) for d, top in zip(delays, nominal, strict=True)}) == 8, "jitter"
    assert 0 < reconnect.remaining() <= delays[-1]
    reconnect.succeeded()
    assert (reconnect.failures, reconnect.delays_seconds, reconnect.waiting) == (0, [], False)
    assert 0.4 <= (reconnect.failed(0.5) or 0) <= 0.5, "the first failure after a success"


def test_the_banner_counts_down_to_the_next_retry() -> None:
    assert describe_retry(3.24) == "next retry in 3.2s"
    assert describe_retry(12.6) == "next retry in 13s"
    assert describe_retry(0.0) == "retrying now"


def assert_backs_off(delays: list[float], base: float) -> None:
    """``delays`` double from ``base`` on (each shortened by at most the jitter, 20 %)."""
    for n, delay in enumerate(delays):
        top = min(base * 2**n, 15.0)
        assert 0.8 * top <= delay <= top, (n, delays)


RETRY = re.compile(
    r"^DATABASE UNAVAILABLE \((next retry in \d+(\.\d)?s|retrying now)\): cannot reach "
)


def test_the_database_going_away_and_back_shows_a_banner_backs_off_and_recovers(
    db: Database, target: Target
) -> None:
    """The dashboard's own database, reached through a proxy, goes away twice and comes back.

    It starts while the database is away, then loses it again after loading: each time a banner
    on every view counts down to the next try, the tries back off exponentially (checked from
    the delays the app scheduled, not by timing them), the refresh timer does not try in
    between, and the first load that works clears the banner, resets the schedule and shows
    what changed meanwhile.
    """
    if target.backend != "postgresql":
        pytest.skip("an SQLite file cannot go away behind a proxy; PostgreSQL's server can")
    enqueue_many(db, [JobBuilder("noop", {}) for _ in range(3)])
    proxy = Proxy.for_url(PG_URL)
    shown = Target("postgresql", proxy.url(target.url), target.schema).open()
    refresh = 0.2
    app = make_app(shown, refresh=refresh)

    def view() -> ViewScreen:
        screen = app.screen
        assert isinstance(screen, ViewScreen)
        return screen

    def banner() -> str | None:
        widget = app.screen.query_one(Banner)
        return plain(widget.render()) if widget.shown else None

    def jobs_listed() -> int:
        return view().query_one("#jobs", DataTable).row_count

    def timer_tries() -> list[dict[str, Any]]:
        """What the refresh timer asks for right now (it must ask nothing while backing off)."""
        calls: list[dict[str, Any]] = []
        real = app.refresh_views
        app.refresh_views = lambda **kw: calls.append(kw)  # type: ignore[method-assign]
        try:
            app._refresh_on_timer()
        finally:
            app.refresh_views = real  # type: ignore[method-assign]
        return calls

    async def ride_out_an_outage(pilot: Any, tries: int) -> list[float]:
        await wait_until(pilot, lambda: banner() is not None, "the outage banner")
        text = banner() or ""
        assert RETRY.match(text), text
        await wait_until(
            pilot, lambda: len(app.reconnect.delays_seconds) >= tries, f"{tries} tries"
        )
        assert app.reconnect.waiting and timer_tries() == []
        return list(app.reconnect.delays_seconds)

    async def scenario() -> None:
        proxy.down()  # away from the start
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.press("2")
            delays = await ride_out_an_outage(pilot, 3)
            assert_backs_off(delays, refresh)  # 0.2 s, 0.4 s, 0.8 s..., not every 0.2 s
            proxy.up()
            await wait_until(pilot, lambda: banner() is None and view().loaded >= 1, "recovery")
            assert (app.reconnect.failures, app.reconnect.delays_seconds) == (0, [])
            assert not app.reconnect.waiting and timer_tries() == [{"auto": True}]
            assert jobs_listed() == 3

            # Loaded, then away again: every view says so, and the schedule starts over.
            proxy.down()
            delays = await ride_out_an_outage(pilot, 4)
            assert_backs_off(delays, refresh)  # from 0.2 s again
            retry_at = app.reconnect.retry_at
            assert retry_at is not None
            for key in ("1", "2"):  # each view switch tries the database at once
                failures = app.reconnect.failures
                await pilot.press(key)
                await wait_until(
                    pilot, lambda f=failures: app.reconnect.failures > f, f"view {key} tried"
                )
                assert banner() is not None
            if time.monotonic() < retry_at:  # ...and leaves the backoff schedule as it was
                assert app.reconnect.delays_seconds == delays and app.reconnect.retry_at == retry_at
            enqueue_many(db, [JobBuilder("noop", {}) for _ in range(2)])  # while it is away
            loaded = view().loaded
            proxy.up()  # found again on its own, no key pressed
            await wait_until(pilot, lambda: banner() is None and view().loaded > loaded, "back")
            assert app.reconnect.failures == 0 and not app.reconnect.waiting
            await wait_until(pilot, lambda: jobs_listed() == 5, "the jobs added meanwhile")
            loaded = view().loaded
            await wait_until(pilot, lambda: view().loaded >= loaded + 2, "refreshing again")
            assert banner() is None

    try:
        asyncio.run(scenario())
    finally:
        proxy.close()
        shown.dispose()


def test_views_refresh_on_their_own(db: Database) -> None:
    app = make_app(db, refresh=0.2)

    async def scenario() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            screen = app.screen
            assert isinstance(screen, ViewScreen)
            await wait_until(pilot, lambda: screen.loaded >= 3, "three refreshes")
            await pilot.press("minus")  # slower
            assert app.refresh_seconds == pytest.approx(0.4)
            await pilot.press("plus", "plus")  # faster, down to the floor
            assert app.refresh_seconds == pytest.approx(0.2)

    asyncio.run(scenario())
