"""A role that may only read: the dashboard and every read work, every action fails cleanly.

On PostgreSQL the role is made by running the security guide's own SQL (names swapped for the test's
schema and a unique role name); on SQLite the same database file is opened read-only
(``?mode=ro&uri=true``). Connected that way, ``kickside-tui --read-only`` shows every view and
every read command works; every action command fails with one line and a documented exit
code, and leaves the database exactly as it was. Without ``--read-only`` the dashboard offers
its actions, and taking one shows a one-line permission-denied notice instead of crashing.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from textual.widgets import DataTable
from typer.testing import CliRunner, Result

from kickside_engine import (
    Database,
    JobBuilder,
    WaitTimeoutError,
    claim,
    complete,
    wait_for,
)
from kickside_tui import app as tui
from kickside_tui.app import KicksideApp
from kickside_tui.screens.base import ViewScreen
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.widgets.chrome import VIEWS, Banner

from ..conftest import PG_URL, Target
from ..support.processes import ROOT
from ..tui.fixtures import make_app, settle, wait_until
from .commands import ACTIONS, READS, seed
from .test_audit_coverage import cli, one_error_line, snapshot

READER_PASSWORD = "change-me"
SECURITY_GUIDE = ROOT / "docs" / "guides" / "security.md"


def readme_sql() -> str:
    """The SQL block of the security guide's "A read-only role" section."""
    text = SECURITY_GUIDE.read_text()
    section = text[text.index("## A read-only role") :]
    match = re.search(r"```sql\n(.*?)```", section, re.DOTALL)
    assert match, "the security guide's read-only role section has no SQL block"
    return match.group(1)


@pytest.fixture
def reader(db: Database, target: Target) -> Iterator[Target]:
    """Where the test database is, as seen by a role (or a file handle) that may only read."""
    if target.backend == "sqlite":
        path = target.url.removeprefix("sqlite:///")
        yield Target("sqlite", f"sqlite:///file:{path}?mode=ro&uri=true", None)
        return
    role = f"kst_reader_{uuid.uuid4().hex[:10]}"
    database = make_url(PG_URL).database
    sql = readme_sql()
    sql = re.sub(r"\bkickside_reader\b", role, sql)
    sql = re.sub(r"\bjobs\b", str(target.schema), sql)
    sql = re.sub(r"\bDATABASE app\b", f'DATABASE "{database}"', sql)
    admin = sa.create_engine(PG_URL)
    try:
        with admin.begin() as conn:
            for statement in (s.strip() for s in sql.split(";")):
                lines = [ln for ln in statement.splitlines() if not ln.lstrip().startswith("--")]
                if "\n".join(lines).strip():
                    conn.exec_driver_sql("\n".join(lines))
        url = make_url(PG_URL).set(username=role, password=READER_PASSWORD)
        yield Target("postgresql", url.render_as_string(hide_password=False), target.schema)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
            conn.exec_driver_sql(f'DROP ROLE "{role}"')
        admin.dispose()


def test_reads_work_for_a_role_that_may_only_read(db: Database, reader: Target) -> None:
    seeded = seed(db)
    before = snapshot(db)
    for flags in ([], ["--read-only"]):
        for name, make in READS.items():
            result = cli(reader, *flags, *make(seeded))
            allowed = (0, 1) if name in ("doctor", "migrate status") else (0,)
            assert result.exit_code in allowed, (name, result.stderr)
            assert "permission denied" not in result.output, (name, result.output[-500:])
    assert snapshot(db) == before


def test_a_role_that_may_only_read_can_wait_for_a_job(db: Database, reader: Target) -> None:
    # It cannot flag the job for a notification (PostgreSQL), so it reads the job until the end.
    job_id = JobBuilder("w").insert(db).id
    reader_db = reader.open()
    try:
        with pytest.raises(WaitTimeoutError):
            wait_for(reader_db, job_id, timeout=0.3)
        (claimed,) = claim(db, queue="default", node="n", limit=1)
        assert complete(db, claimed, result=[1])
        assert wait_for(reader_db, job_id, timeout=30).result == [1]
    finally:
        reader_db.dispose()


def test_every_action_fails_cleanly_for_a_role_that_may_only_read(
    db: Database, reader: Target
) -> None:
    seeded = seed(db)
    before = snapshot(db)
    for name, action in ACTIONS.items():
        result: Result = cli(reader, *action.argv(seeded))
        assert result.exit_code == 1, (name, result.exit_code, result.stderr)
        assert "permission denied" in one_error_line(result), name
        assert READER_PASSWORD not in result.output, name
        refused = cli(reader, "--read-only", *action.argv(seeded))
        assert refused.exit_code == 2, (name, refused.stderr)
    assert snapshot(db) == before, "an action half-wrote something"


def test_the_dashboard_shows_every_view_for_a_role_that_may_only_read(
    db: Database, reader: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(db)
    started: list[KicksideApp] = []
    monkeypatch.setattr(KicksideApp, "run", lambda self, *a, **k: started.append(self))
    result = CliRunner().invoke(tui.cli, ["--read-only", *reader.cli_args()])
    assert result.exit_code == 0, result.output
    (app,) = started
    before = snapshot(db)

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            assert "read-only" in app.sub_title and READER_PASSWORD not in app.sub_title
            for _name, key, label in VIEWS:
                await pilot.press(key)
                await settle(pilot)
                screen: Any = app.view_screen()
                assert isinstance(screen, ViewScreen)
                await wait_until(pilot, lambda s=screen: s.loaded >= 1, f"{label} loaded")
                banner = screen.query_one(Banner)
                assert not banner.shown, (label, banner.render())

    try:
        asyncio.run(scenario())
    finally:
        app.adapter.db.dispose()
    assert snapshot(db) == before


def test_a_dashboard_action_without_read_only_says_permission_denied_and_writes_nothing(
    db: Database, reader: Target
) -> None:
    seeded = seed(db)
    before = snapshot(db)
    reader_db = reader.open()
    app = make_app(reader_db)  # not read-only: the actions are offered, the database refuses
    notices: list[tuple[str, str]] = []
    real_notify = app.notify

    def notify(message: str, **options: Any) -> None:
        notices.append((message, str(options.get("severity", "information"))))
        real_notify(message, **options)

    app.notify = notify  # type: ignore[method-assign]

    def select(table_id: str, key: str) -> None:
        table: DataTable[Any] = app.screen.query_one(table_id, DataTable)
        table.move_cursor(row=table.get_row_index(key))

    async def refused(pilot: Any, key: str, *, confirm: bool = False) -> None:
        """Press ``key``, say yes when asked: one error notice saying permission denied."""
        seen = len(notices)
        view = app.screen
        assert isinstance(view, ViewScreen)
        loaded = view.loaded
        await pilot.press(key)
        if confirm:
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "confirm")
            await pilot.press("y")
        await wait_until(pilot, lambda: len(notices) > seen, f"the notice after {key!r}")
        await settle(pilot)
        ((message, severity),) = notices[seen:]
        assert severity == "error" and "permission denied" in message, (key, message)
        assert "\n" not in message and "Traceback" not in message, message
        assert READER_PASSWORD not in message
        assert app.screen is view, "the dashboard carries on, on the same view"
        # ...and still reads: the reload after the action worked.
        await wait_until(pilot, lambda: view.loaded > loaded, "the reload after the action")
        assert not view.query_one(Banner).shown

    async def scenario() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("2")
            await settle(pilot)
            select("#jobs", str(seeded.wake))
            await refused(pilot, "w")
            select("#jobs", str(seeded.cancel))
            await refused(pilot, "c", confirm=True)
            await pilot.press("7")
            await settle(pilot)
            select("#queues", "audited")
            await refused(pilot, "r")
            select("#queues", "default")
            await refused(pilot, "p", confirm=True)
        assert app.return_code in (None, 0)

    try:
        asyncio.run(scenario())
    finally:
        reader_db.dispose()
    assert snapshot(db) == before, "a refused dashboard action wrote something"


def test_readme_grants_read_access_and_nothing_more() -> None:
    sql = readme_sql()
    assert "GRANT SELECT" in sql and "GRANT USAGE ON SCHEMA" in sql
    for word in ("INSERT", "UPDATE", "DELETE", "ALL PRIVILEGES", "TRUNCATE", "CREATE ON"):
        assert word not in sql.upper(), word
    assert SECURITY_GUIDE.read_text().count("## A read-only role") == 1
