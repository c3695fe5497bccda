"""The `kickside-tui` command line: options, environment, and errors before the UI starts."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, migrate
from kickside_engine.clock import utcnow
from kickside_engine.config import DATABASE_URL_ENV, HOME_ENV, SCHEMA_ENV
from kickside_engine.control.schedules import running_schedule
from kickside_engine.plugins.cron import Recurring, cron_tick
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_tui.adapter import Adapter
from kickside_tui.app import KicksideApp, cli
from kickside_tui.demo import workload
from kickside_tui.screens.ops import OpsScreen
from kickside_tui.widgets.view_table import ViewTable

from ..conftest import Target
from ..support.processes import wait_for
from ..support.workers import registry
from .fixtures import SCHEDULE, plain, settle, wait_until


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
    (tmp_path / "k.sqlite3").touch()  # the dashboard opens a database; it never makes one
    monkeypatch.setenv("KICKSIDE_DATABASE_URL", f"sqlite:///{tmp_path / 'k.sqlite3'}")
    result = CliRunner().invoke(
        cli, ["--read-only", "--refresh", "2.5", "--schedule", "tests.tui.fixtures:SCHEDULE"]
    )
    assert result.exit_code == 0, result.output
    (app,) = started
    assert app.read_only and app.refresh_seconds == 2.5
    assert list(app.adapter.schedule) == SCHEDULE
    assert str(tmp_path / "k.sqlite3") in app.adapter.describe()


def test_the_dashboard_keeps_log_lines_off_its_screen_and_puts_logging_back_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logger = logging.getLogger("kickside")
    mine = logging.StreamHandler()
    monkeypatch.setattr(logger, "handlers", [mine])
    monkeypatch.setattr(logger, "propagate", True)
    while_running: list[tuple[list[logging.Handler], bool]] = []

    def run(self: KicksideApp, *args: Any, **kwargs: Any) -> None:
        while_running.append((list(logger.handlers), logger.propagate))

    monkeypatch.setattr(KicksideApp, "run", run)
    (tmp_path / "k.sqlite3").touch()
    result = CliRunner().invoke(cli, ["--database-url", f"sqlite:///{tmp_path / 'k.sqlite3'}"])
    assert result.exit_code == 0, result.output
    ((handlers, propagate),) = while_running
    assert not propagate and all(isinstance(h, logging.NullHandler) for h in handlers)
    assert logger.handlers == [mine] and logger.propagate  # as the host had it


def test_bad_configuration_exits_with_a_message(started: list[KicksideApp], tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--database-url", "mysql://db/x"])
    assert result.exit_code == 2
    assert "unsupported database" in result.output
    (tmp_path / "k.sqlite3").touch()
    result = CliRunner().invoke(
        cli,
        [
            "--database-url",
            f"sqlite:///{tmp_path / 'k.sqlite3'}",
            "--schedule",
            "tests.tui.fixtures:NOW",
        ],
    )
    assert result.exit_code == 2
    assert "not a list of Recurring entries" in result.output
    assert started == []


def _configured_without_options(target: Target, monkeypatch: pytest.MonkeyPatch) -> Database:
    """The environment an operator has: SQLite is the default file under KICKSIDE_HOME,
    PostgreSQL comes from KICKSIDE_DATABASE_URL; no option given."""
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.delenv(SCHEMA_ENV, raising=False)
    if target.backend == "sqlite":
        home = Path(target.url.removeprefix("sqlite:///")).parent
        monkeypatch.setenv(HOME_ENV, str(home))
    else:
        monkeypatch.setenv(DATABASE_URL_ENV, target.url)
        monkeypatch.setenv(SCHEMA_ENV, target.schema or "")
    db = target.open()
    migrate.upgrade(db)
    return db


def _cron_view(app: KicksideApp) -> tuple[list[list[str]], str]:
    """The Cron table's rows and the note under it, once the Queues/nodes/cron view shows."""

    async def scenario() -> tuple[list[list[str]], str]:
        async with app.run_test(size=(140, 40)) as pilot:
            await pilot.press("7")
            await wait_until(pilot, lambda: isinstance(app.screen, OpsScreen), "the ops view")
            await settle(pilot)
            screen = app.screen
            table = screen.query_one("#cron", ViewTable)
            # Every column, also those a narrower terminal would not show.
            rows = [[str(cell) for cell in table.declared_row(str(k.value))] for k in table.rows]
            return rows, plain(screen.query_one("#cron-note", Static).content).strip()

    try:
        return asyncio.run(scenario())
    finally:
        app.adapter.db.dispose()  # the CLI disposed it when (our stand-in for) run returned


def test_with_no_options_a_demo_database_shows_the_demo_cron_entries(
    started: list[KicksideApp], target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _configured_without_options(target, monkeypatch)
    try:
        workload.prepare(db)  # what `kickside demo` does first on the database it fills
        (fired,) = cron_tick(db, workload.SCHEDULE, utcnow())
    finally:
        db.dispose()
    result = CliRunner().invoke(cli, [])
    assert result.exit_code == 0, result.output
    (app,) = started
    assert list(app.adapter.schedule) == []  # nothing was given: the database says it is the demo
    if target.backend == "sqlite":  # the default file under KICKSIDE_HOME
        assert target.url.removeprefix("sqlite:///") in app.adapter.describe()
    rows, note = _cron_view(app)
    assert [row[:2] for row in rows] == [["demo.search_index_refresh", "* * * * *"]]
    _, _, _, _, last_run, next_run, last_job, problem = rows[0]
    assert last_run != "never" and next_run != "-" and problem == ""
    assert last_job == str(fired.job_id)[-8:]
    assert note.startswith("the demo's cron schedule (kickside demo filled this database)")


def test_with_no_options_another_database_says_how_to_show_cron_entries(
    started: list[KicksideApp], target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _configured_without_options(target, monkeypatch)
    try:  # an application's history: cron ran, but its schedule lives in the app's code
        cron_tick(db, SCHEDULE, utcnow().replace(minute=0, second=0, microsecond=0))
    finally:
        db.dispose()
    result = CliRunner().invoke(cli, [])
    assert result.exit_code == 0, result.output
    (app,) = started
    rows, note = _cron_view(app)
    assert rows == []
    assert note.startswith("no running node publishes a cron entry: kickside worker --app MODULE")
    assert "--schedule module:ATTRIBUTE" in note


def test_with_no_options_the_cron_table_shows_what_the_running_nodes_publish(
    started: list[KicksideApp], target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _configured_without_options(target, monkeypatch)
    schedule = [
        Recurring("minutely", "* * * * *", lambda: JobBuilder("ok", {})),
        Recurring(
            "berlin",
            "30 2 * * *",
            lambda: JobBuilder("ok", {}).queue("reports"),
            timezone="Europe/Berlin",
        ),
    ]
    pool = WorkerPool(
        db,
        PoolConfig(
            queues={"default": 1},
            mode="thread",
            registry=registry,
            node="tui-node",
            schedule=schedule,
        ),
    )
    pool.start()
    try:
        # "* * * * *" was due under a minute ago: the pool's first plugin tick fires it.
        wait_for(
            lambda: running_schedule(db, utcnow()) and running_schedule(db, utcnow())[1].last_run,
            60,
            "the pool to fire cron",
        )
        result = CliRunner().invoke(cli, [])
        assert result.exit_code == 0, result.output
        (app,) = started
        rows, note = _cron_view(app)
    finally:
        pool.stop(30)
        db.dispose()
    assert [row[:4] for row in rows] == [
        ["berlin", "30 2 * * * (Europe/Berlin)", "ok (reports)", "tui-node"],
        ["minutely", "* * * * *", "ok (default)", "tui-node"],
    ]
    berlin, minutely = rows
    assert berlin[4] == "never" and berlin[5] != "-"
    assert minutely[4] != "never" and minutely[7] == ""
    assert note == "the entries the running nodes publish"


def test_sigterm_closes_the_dashboard_as_q_does(db: Database) -> None:
    """``kill`` (or a service manager) closes the dashboard cleanly: the app exits, the terminal
    is restored, and what runs after it (the demo's stop) still runs."""
    migrate.upgrade(db)
    app = KicksideApp(Adapter(db), refresh_seconds=60.0)

    def not_handled(signum: int, frame: object) -> None:
        raise AssertionError("SIGTERM reached the default handler: the dashboard ignored it")

    async def scenario() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            os.kill(os.getpid(), signal.SIGTERM)
            await wait_until(pilot, lambda: app.return_code == 0, "the app to exit")

    previous = signal.signal(signal.SIGTERM, not_handled)
    try:
        asyncio.run(scenario())
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert app.return_code == 0


def test_the_configuration_file_names_the_database_below_flags_and_environment(
    started: list[KicksideApp], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in (DATABASE_URL_ENV, SCHEMA_ENV, "KICKSIDE_READ_ONLY", "KICKSIDE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "from-file.sqlite3").touch()
    (tmp_path / "from-flag.sqlite3").touch()
    (tmp_path / "kickside.toml").write_text(
        f'database_url = "sqlite:///{tmp_path / "from-file.sqlite3"}"\nread_only = true\n'
    )
    assert CliRunner().invoke(cli, []).exit_code == 0
    flag = f"sqlite:///{tmp_path / 'from-flag.sqlite3'}"
    assert CliRunner().invoke(cli, ["--database-url", flag]).exit_code == 0
    from_file, from_flag = started
    assert str(tmp_path / "from-file.sqlite3") in from_file.adapter.describe()
    assert from_file.read_only and from_flag.read_only  # the file's read_only holds for both
    assert str(tmp_path / "from-flag.sqlite3") in from_flag.adapter.describe()
    # A database the file names but that does not exist is one line naming it, no UI.
    (tmp_path / "kickside.toml").write_text(f'database_url = "sqlite:///{tmp_path / "no.db"}"\n')
    missing = CliRunner().invoke(cli, [])
    assert missing.exit_code != 0 and str(tmp_path / "no.db") in missing.output
    assert len(started) == 2
