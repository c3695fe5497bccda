"""`KICKSIDE_READ_ONLY` makes `kickside-tui` read-only, and an action key then says so."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from textual.widgets import DataTable
from typer.testing import CliRunner

from kickside_engine import JobState, get_job, migrate
from kickside_engine.clock import utcnow
from kickside_engine.config import DATABASE_URL_ENV, SCHEMA_ENV
from kickside_engine.control import list_audit, list_queues
from kickside_tui.app import KicksideApp, cli
from kickside_tui.cli.context import READ_ONLY_ENV
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.widgets.chrome import ViewBar

from ..conftest import Target
from .fixtures import build_demo_data, plain, settle


def _started(target: Target, monkeypatch: pytest.MonkeyPatch, read_only: str | None) -> KicksideApp:
    """The app `kickside-tui` builds with no options, in an environment that sets the variable."""
    monkeypatch.setenv(DATABASE_URL_ENV, target.url)
    if target.schema:
        monkeypatch.setenv(SCHEMA_ENV, target.schema)
    else:
        monkeypatch.delenv(SCHEMA_ENV, raising=False)
    if read_only is None:
        monkeypatch.delenv(READ_ONLY_ENV, raising=False)
    else:
        monkeypatch.setenv(READ_ONLY_ENV, read_only)
    apps: list[KicksideApp] = []
    monkeypatch.setattr(KicksideApp, "run", lambda self, *a, **k: apps.append(self))
    result = CliRunner().invoke(cli, [])
    assert result.exit_code == 0, result.output
    (app,) = apps
    return app


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("true", True), ("0", False)])
def test_the_environment_variable_sets_read_only_mode(
    target: Target, monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    app = _started(target, monkeypatch, value)
    app.adapter.db.dispose()
    assert app.read_only is expected


def test_without_the_variable_the_dashboard_may_act(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _started(target, monkeypatch, None)
    app.adapter.db.dispose()
    assert not app.read_only


def test_read_only_from_the_environment_an_action_key_says_so_and_writes_nothing(
    target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = target.open()
    try:
        migrate.upgrade(db)
        ids = build_demo_data(db)
        audit_before = len(list_audit(db, limit=1000).entries)
        paused_before = {q.name: q.paused for q in list_queues(db, utcnow())}
    finally:
        db.dispose()
    app = _started(target, monkeypatch, "1")
    toasts: list[tuple[str, str]] = []
    real_notify = app.notify

    def notify(message: str, **options: Any) -> None:
        toasts.append((message, str(options.get("severity", "information"))))
        real_notify(message, **options)

    app.notify = notify  # type: ignore[method-assign]
    first = ids.available[0]

    async def pressed(pilot: Any, key: str) -> str:
        toasts.clear()
        await pilot.press(key)
        await settle(pilot)
        assert not isinstance(app.screen, ConfirmScreen), key
        assert len(toasts) == 1, (key, toasts)
        message, severity = toasts[0]
        assert message.startswith("read-only dashboard: ") and severity == "warning", message
        return message

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "READ-ONLY" in plain(app.screen.query_one(ViewBar).render())
            await pilot.press("2")
            await settle(pilot)
            table: DataTable[Any] = app.screen.query_one("#jobs", DataTable)
            table.focus()
            table.move_cursor(row=table.get_row_index(str(first)))
            assert await pressed(pilot, "c") == (
                "read-only dashboard: Cancel is disabled "
                "(started with --read-only or KICKSIDE_READ_ONLY)"
            )
            assert "Retry is disabled" in await pressed(pilot, "r")
            assert "Bulk… is disabled" in await pressed(pilot, "b")
            await pilot.press("3")
            await settle(pilot)
            assert "Purge is disabled" in await pressed(pilot, "x")
            await pilot.press("7")
            await settle(pilot)
            assert "Pause queue is disabled" in await pressed(pilot, "p")
            toasts.clear()
            await pilot.press("g")  # a key that only reads still works, without a word
            await settle(pilot)
            assert toasts == []

    try:
        asyncio.run(scenario())
    finally:
        app.adapter.db.dispose()
    db = target.open()
    try:
        assert get_job(db, first).state is JobState.AVAILABLE  # type: ignore[union-attr]
        assert {q.name: q.paused for q in list_queues(db, utcnow())} == paused_before
        assert len(list_audit(db, limit=1000).entries) == audit_before
    finally:
        db.dispose()
