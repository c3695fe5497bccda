"""Each view's rendering, pinned on the demo data with a frozen clock (SQLite).

Update the snapshots after an intended change with ``pytest tests/tui --snapshot-update``
and review the SVGs under ``tests/tui/__snapshots__``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from kickside_engine import connect_database, migrate
from kickside_tui.app import KicksideApp
from kickside_tui.screens import metrics

from .fixtures import build_demo_data, demo_app, settle

VIEW_KEYS = {
    "overview": "1",
    "jobs": "2",
    "slots": "3",
    "leases": "4",
    "capacity": "5",
    "metrics": "6",
    "ops": "7",
}


@pytest.fixture(autouse=True)
def _doctor_time_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot is the layout, not this machine's speed: a doctor slowed past a second by a
    loaded CI machine would add ", took 1.3s" to the Metrics view."""
    monkeypatch.setattr(metrics, "SHOW_DOCTOR_TIME_FROM_S", float("inf"))


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One demo database, built once for every snapshot (the snapshots only read it)."""
    path: Path = tmp_path_factory.mktemp("snapshots") / "demo.sqlite3"
    url = f"sqlite:///{path}"
    db = connect_database(url)
    try:
        migrate.upgrade(db)
        build_demo_data(db)
    finally:
        db.dispose()
    return url


def _show(key: str) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press(key)
        await settle(pilot)

    return run_before


@pytest.mark.parametrize("view", list(VIEW_KEYS))
def test_view_snapshot(view: str, demo_url: str, snap_compare: Any) -> None:
    db = connect_database(demo_url)
    try:
        app: KicksideApp = demo_app(db)
        assert snap_compare(app, terminal_size=(120, 40), run_before=_show(VIEW_KEYS[view]))
    finally:
        db.dispose()


@pytest.mark.parametrize("view", list(VIEW_KEYS))
def test_small_terminal_snapshot(view: str, demo_url: str, snap_compare: Any) -> None:
    db = connect_database(demo_url)
    try:
        app: KicksideApp = demo_app(db)
        assert snap_compare(app, terminal_size=(80, 24), run_before=_show(VIEW_KEYS[view]))
    finally:
        db.dispose()
