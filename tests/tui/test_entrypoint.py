"""The `kickside-tui` command line: options, environment, and errors before the UI starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kickside_tui.app import KicksideApp, cli

from .fixtures import SCHEDULE


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[KicksideApp]:
    """Capture the app instead of taking over the terminal."""
    apps: list[KicksideApp] = []

    def run(self: KicksideApp, *args: Any, **kwargs: Any) -> None:
        apps.append(self)

    monkeypatch.setattr(KicksideApp, "run", run)
    return apps


def test_options_and_environment_configure_the_app(
    started: list[KicksideApp], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KICKSIDE_DATABASE_URL", f"sqlite:///{tmp_path / 'k.sqlite3'}")
    result = CliRunner().invoke(
        cli, ["--read-only", "--refresh", "2.5", "--schedule", "tests.tui.fixtures:SCHEDULE"]
    )
    assert result.exit_code == 0, result.output
    (app,) = started
    assert app.read_only and app.refresh_seconds == 2.5
    assert list(app.adapter.schedule) == SCHEDULE
    assert str(tmp_path / "k.sqlite3") in app.adapter.describe()


def test_bad_configuration_exits_with_a_message(
    started: list[KicksideApp], tmp_path: Path
) -> None:
    result = CliRunner().invoke(cli, ["--database-url", "mysql://db/x"])
    assert result.exit_code == 2
    assert "unsupported database" in result.output
    result = CliRunner().invoke(cli, ["--database-url", f"sqlite:///{tmp_path / 'k.sqlite3'}",
                                      "--schedule", "tests.tui.fixtures:NOW"])
    assert result.exit_code == 2
    assert "not a list of Recurring entries" in result.output
    assert started == []
