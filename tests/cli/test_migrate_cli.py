"""`kickside migrate`: upgrade, status, down; errors as one line with the documented exit code."""

from __future__ import annotations

import json
import subprocess
import sys

import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import migrate
from kickside_tui.cli.main import app

from ..conftest import Target

runner = CliRunner()


def test_migrate_upgrades_then_reports_up_to_date(target: Target) -> None:
    first = runner.invoke(app, [*target.cli_args(), "migrate"])
    assert first.exit_code == 0, first.output
    assert f"upgraded to {migrate.head_revision()}" in first.stdout
    second = runner.invoke(app, [*target.cli_args(), "migrate", "--json"])
    assert second.exit_code == 0
    assert json.loads(second.stdout) == {
        "current": migrate.head_revision(),
        "head": migrate.head_revision(),
        "pending": [],
        "up_to_date": True,
        "oldest_code_head": migrate.code_floor(migrate.head_revision()),
        "stopped_by_upgrade": [],
    }


def test_status_exits_1_while_an_upgrade_is_pending(target: Target) -> None:
    result = runner.invoke(app, [*target.cli_args(), "migrate", "status", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["current"] is None


def test_down_refuses_without_yes_and_without_a_terminal(target: Target) -> None:
    runner.invoke(app, [*target.cli_args(), "migrate"])
    refused = runner.invoke(app, [*target.cli_args(), "migrate", "down", "base"])
    assert refused.exit_code == 2
    assert "--yes" in refused.stderr
    db = target.open()
    assert migrate.status(db).up_to_date
    done = runner.invoke(app, [*target.cli_args(), "migrate", "down", "base", "--yes", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["current"] is None
    assert migrate.current_revision(db) is None
    db.dispose()


def test_unknown_revision_is_a_one_line_error(target: Target) -> None:
    runner.invoke(app, [*target.cli_args(), "migrate"])
    db = target.open()
    table = f'"{db.schema}".{migrate.VERSION_TABLE}' if db.schema else migrate.VERSION_TABLE
    with db.begin() as conn:
        conn.execute(sa.text(f"UPDATE {table} SET version_num = 'zz99'"))
    db.dispose()
    result = runner.invoke(app, [*target.cli_args(), "migrate"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "zz99" in result.stderr


def test_unreachable_database_exits_5_without_traceback_or_password() -> None:
    url = "postgresql://deploy:not-a-password@127.0.0.1:1/db"
    proc = subprocess.run(
        [sys.executable, "-m", "kickside_tui.cli", "--database-url", url, "migrate"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 5
    assert "Traceback" not in proc.stderr
    assert "not-a-password" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1


def test_invalid_url_exits_2() -> None:
    result = runner.invoke(app, ["--database-url", "mysql://a:b@c/d", "migrate"])
    assert result.exit_code == 2
    assert "unsupported database 'mysql'" in result.stderr


def test_help_documents_exit_codes_and_hides_the_password_from_the_environment() -> None:
    result = runner.invoke(
        app, ["--help"], env={"KICKSIDE_DATABASE_URL": "postgresql://u:not-a-password@h/db"}
    )
    assert result.exit_code == 0
    assert "not-a-password" not in result.stdout
    assert "5 database unavailable" in " ".join(result.stdout.split())
