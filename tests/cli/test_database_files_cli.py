"""A bad SQLite path is one line and exit 2; only `migrate` and `demo` create a missing file.

A mistyped path must never turn into an empty, newly made database that shows "no jobs", and a
file that is not a database (or a directory) is named with what is wrong, never a raw driver
error. SQLite-only by nature: PostgreSQL URLs name no file.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from kickside_tui import app as tui
from kickside_tui.cli.main import app

from ..security.commands import ACTIONS, OTHER_WRITERS, READS, Seeded
from ..support.processes import ROOT

runner = CliRunner()
#: Ids for the commands' arguments: none of them gets as far as looking them up.
IDS = Seeded(*(uuid.uuid4() for _ in range(8)))
#: Every command that opens the database, but the two that may create the file (the demo is
#: slow: its own test). ``config`` never opens it: its own test below.
COMMANDS = {
    **{name: make(IDS) for name, make in READS.items() if name != "config"},
    **{name: action.argv(IDS) for name, action in ACTIONS.items()},
    **{name: argv for name, argv in OTHER_WRITERS.items() if name not in ("migrate", "demo")},
}


def kickside(url: str, *argv: str) -> Result:
    return runner.invoke(app, ["--database-url", url, *argv])


def one_error_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_on_a_missing_file_says_so_and_creates_nothing(name: str, tmp_path: Path) -> None:
    path = tmp_path / "typo" / "x.sqlite3"
    result = kickside(f"sqlite:///{path}", *COMMANDS[name])
    assert result.exit_code == 2, (name, result.output)
    line = one_error_line(result)
    assert "does not exist" in line and str(path) in line, line
    assert not (tmp_path / "typo").exists(), f"{name} created the folder"


def test_config_shows_a_missing_file_without_opening_or_creating_it(tmp_path: Path) -> None:
    path = tmp_path / "typo" / "x.sqlite3"
    result = kickside(f"sqlite:///{path}", "config", "--json")
    assert result.exit_code == 0, result.output
    assert str(path) in result.stdout
    assert not (tmp_path / "typo").exists()


def test_the_dashboard_on_a_missing_file_says_so_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "typo" / "x.sqlite3"
    result = runner.invoke(tui.cli, ["--database-url", f"sqlite:///{path}"])
    assert result.exit_code == 2, result.output
    assert "does not exist" in result.output and str(path) in result.output
    assert not (tmp_path / "typo").exists()


def test_migrate_creates_the_file_and_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "new" / "x.sqlite3"
    result = kickside(f"sqlite:///{path}", "migrate")
    assert result.exit_code == 0, result.output
    assert path.is_file()
    assert kickside(f"sqlite:///{path}", "jobs").exit_code == 0


@pytest.mark.parametrize(
    "argv", [["jobs"], ["migrate"], ["worker", "--app", "tests.support.pool_app"]]
)
def test_a_file_that_is_not_a_database_is_named_with_exit_2(
    argv: list[str], tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database\n")
    result = kickside(f"sqlite:///{notes}", *argv)
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert "not a SQLite database" in line and str(notes) in line, line
    assert notes.read_text() == "not a database\n"


def test_a_directory_is_named_with_exit_2_from_a_real_process(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kickside_tui.cli",
            "--database-url",
            f"sqlite:///{tmp_path}",
            "migrate",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a directory" in lines[0] and str(tmp_path) in lines[0]
