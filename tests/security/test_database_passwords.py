"""The database URL's password is never printed: not in errors, `--help`, logs or the header.

The password may sit in the URL's user info (``postgresql://ops:PW@host/db``) or in its query
(``?password=PW``, which libpq also reads). Every way Kickside shows a URL masks both.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from typer.testing import CliRunner, Result

from kickside_engine import connect_database, migrate
from kickside_engine.config import display_url
from kickside_tui import app as tui
from kickside_tui.app import KicksideApp
from kickside_tui.cli.main import app
from kickside_tui.widgets.chrome import Banner

from ..conftest import PG_URL, require_postgres
from ..support.processes import start_worker, stop, wait_for
from ..tui.fixtures import plain, settle

PASSWORD = "Sup3r-S3cret-Pw"
UNREACHABLE = (
    f"postgresql://ops:{PASSWORD}@127.0.0.1:1/app",
    f"postgresql+psycopg://ops@127.0.0.1:1/app?password={PASSWORD}&sslmode=disable",
)
MALFORMED = (
    f"postgresql://ops:{PASSWORD}@db:not-a-port/app",  # not a port
    f"postgresql://ops:{PASSWORD}@[::1/app",  # broken IPv6 literal
    f"mysql://ops:{PASSWORD}@db/app",  # not a supported database
    f"postgresql+asyncpg://ops:{PASSWORD}@db/app",  # not a supported driver
    f"postgresql://ops:{PASSWORD}@db",  # no database name
)
runner = CliRunner()


def assert_no_password(result: Result, where: str) -> None:
    assert PASSWORD not in result.stdout, where
    assert PASSWORD not in result.stderr, where
    assert "Traceback" not in result.output, where


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[KicksideApp]:
    """`kickside-tui`'s app, captured instead of taking over the terminal."""
    apps: list[KicksideApp] = []
    monkeypatch.setattr(KicksideApp, "run", lambda self, *a, **k: apps.append(self))
    return apps


def test_display_url_masks_every_password() -> None:
    for url in (*UNREACHABLE, *MALFORMED):
        assert PASSWORD not in display_url(url), url
    shown = display_url(UNREACHABLE[1])
    assert "password=***" in shown and "sslmode=disable" in shown


@pytest.mark.parametrize("url", UNREACHABLE)
@pytest.mark.parametrize(
    "argv",
    [
        ["jobs"],
        ["job", "01a22b5b-2c00-7000-8000-000000000001"],
        ["doctor"],
        ["migrate"],
        ["migrate", "status"],
        ["stats", "--json"],
        ["worker", "--app", "tests.support.pool_app"],
    ],
)
def test_an_unreachable_database_is_reported_without_its_password(
    url: str, argv: list[str]
) -> None:
    result = runner.invoke(app, ["--database-url", url, *argv])
    assert result.exit_code == 5, result.stderr
    assert "cannot reach postgresql+psycopg://ops" in result.stderr  # who and where stay
    assert_no_password(result, " ".join(argv))


@pytest.mark.parametrize("url", MALFORMED)
def test_a_malformed_url_is_a_usage_error_without_its_password(
    url: str, monkeypatch: pytest.MonkeyPatch, started: list[KicksideApp]
) -> None:
    result = runner.invoke(app, ["--database-url", url, "jobs"])
    assert result.exit_code == 2, result.stderr
    assert_no_password(result, url)
    monkeypatch.setenv("KICKSIDE_DATABASE_URL", url)
    result = runner.invoke(app, ["queues"])
    assert result.exit_code == 2, result.stderr
    assert_no_password(result, f"{url} from the environment")
    result = runner.invoke(tui.cli, [])
    assert result.exit_code == 2, result.output
    assert_no_password(result, f"kickside-tui with {url}")
    assert started == []


@pytest.mark.parametrize("url", UNREACHABLE)
def test_help_never_shows_the_password(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KICKSIDE_DATABASE_URL", url)
    for entry, argv in (
        (app, ["--help"]),
        (app, ["jobs", "--help"]),
        (app, ["--database-url", url, "queues", "--help"]),
        (app, ["--database-url", url, "--help"]),
        (tui.cli, ["--help"]),
        (tui.cli, ["--database-url", url, "--help"]),
    ):
        result = runner.invoke(entry, argv)
        assert result.exit_code == 0, result.output
        if argv[-2:] != ["queues", "--help"] and argv[0] != "jobs":
            assert "KICKSIDE_DATABASE_URL" in result.stdout  # the option is listed, not its value
        assert_no_password(result, " ".join(argv))


@pytest.mark.parametrize("url", UNREACHABLE)
def test_the_dashboard_header_and_banner_hide_the_password(
    url: str, started: list[KicksideApp]
) -> None:
    result = runner.invoke(tui.cli, ["--database-url", url, "--refresh", "60"])
    assert result.exit_code == 0, result.output
    (dashboard,) = started
    texts: list[str] = []

    async def scenario() -> None:
        async with dashboard.run_test(size=(120, 30)) as pilot:
            await settle(pilot)
            banner = dashboard.screen.query_one(Banner)
            assert banner.shown
            texts.extend([dashboard.sub_title, plain(banner.render())])

    try:
        asyncio.run(scenario())
    finally:
        dashboard.adapter.db.dispose()
    header, banner_text = texts
    assert "***" in header and PASSWORD not in header
    assert "DATABASE UNAVAILABLE" in banner_text and PASSWORD not in banner_text


def test_a_reachable_database_with_a_password_is_shown_masked(
    tmp_path: Path, started: list[KicksideApp]
) -> None:
    require_postgres()
    # The test server trusts local connections, so any password gets in: it must not show.
    url = make_url(PG_URL).set(password=PASSWORD).render_as_string(hide_password=False)
    schema = f"kst_pw_{uuid.uuid4().hex[:12]}"
    db = connect_database(url, schema=schema)
    try:
        migrate.upgrade(db)
        assert PASSWORD not in repr(db) and PASSWORD not in db.display_url()
        result = runner.invoke(tui.cli, ["--database-url", url, "--schema", schema])
        assert result.exit_code == 0, result.output
        (dashboard,) = started
        header = dashboard.adapter.describe()  # what the header shows once mounted
        assert "***" in header and PASSWORD not in header
        dashboard.adapter.db.dispose()
        # A pool announces where it works, and logs what it does, with the password masked.
        log = tmp_path / "pool.log"
        pool = start_worker(["--database-url", url, "--schema", schema], log=log)
        try:
            wait_for(lambda: "kickside worker" in log.read_text(), 30, "the pool to start")
        finally:
            assert stop(pool) == 0
        text = log.read_text()
        assert PASSWORD not in text
        assert f"{make_url(PG_URL).username}:***@" in text
    finally:
        with db.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        db.dispose()
