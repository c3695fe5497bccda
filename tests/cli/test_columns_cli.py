"""Tables fit the terminal: short ids (which every command taking an id accepts), the least
needed columns dropped first, ``COLUMNS`` respected, no padding at line ends, ``--wide`` for
everything, ``--json`` unchanged."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, enqueue, get_job
from kickside_engine.testing import drain_jobs
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support.processes import ROOT
from ..support.workers import registry

runner = CliRunner()
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def cli(target: Target, *args: str, columns: int | None = None) -> Result:
    env = {"COLUMNS": str(columns) if columns else None}
    return runner.invoke(app, [*target.cli_args(), *args], env=env)


def workload(db: Database) -> list[uuid.UUID]:
    """Jobs with long names, tags and errors: what an operator's listing holds."""
    ids = [
        enqueue(
            db,
            JobBuilder("fail", {"order": n})
            .queue("demo-mailers-eu-west")
            .tag(f"order:{1000 + n}")
            .tag("priority-customer"),
        ).id
        for n in range(3)
    ]
    drain_jobs(db, registry, queue="demo-mailers-eu-west")  # each has an error now
    ids.append(enqueue(db, JobBuilder("ok", {}).slot("demo.accounts", "sync", "acct-001")).id)
    return ids


def assert_fits(text: str, width: int) -> list[str]:
    lines = text.splitlines()
    for line in lines:
        assert len(line) <= width, (width, line)
        assert line == line.rstrip(), f"padding at the end of {line!r}"
    return lines


def test_a_listing_fits_80_columns_with_short_ids_and_the_needed_columns(
    db: Database, target: Target
) -> None:
    ids = workload(db)
    result = cli(target, "jobs", columns=80)
    assert result.exit_code == 0, result.output
    lines = assert_fits(result.stdout, 80)
    assert len(lines) == 1 + len(ids)  # one line per job: no id split over lines
    header = lines[0].split()
    assert header[:4] == ["id", "state", "queue", "worker"] and "tags" not in header
    for job_id in ids:
        assert str(job_id)[-8:] in result.stdout and str(job_id) not in result.stdout
    assert "last error" in lines[0]  # the errors stay, cut to fit: the tags went first
    narrow = cli(target, "jobs", columns=50)
    assert assert_fits(narrow.stdout, 50)[0].split()[:3] == ["id", "state", "worker"]
    for argv in (["queues"], ["slots"], ["stats"], ["audit"], ["job", str(ids[0])]):
        shown = cli(target, *argv, columns=80)
        assert shown.exit_code == 0, (argv, shown.output)
        assert_fits(shown.stdout, 80)


def test_wide_shows_every_column_and_full_ids_and_json_is_unchanged(
    db: Database, target: Target
) -> None:
    ids = workload(db)
    for argv in (["--wide", "jobs"], ["jobs", "--wide"]):  # a global option: either side
        wide = cli(target, *argv, columns=80)
        assert wide.exit_code == 0, wide.output
        assert all(str(i) in wide.stdout for i in ids)
        header = wide.stdout.splitlines()[0].split()
        assert header[:6] == ["id", "state", "queue", "worker", "attempt", "tags"]
    as_json = cli(target, "jobs", "--json", columns=40)
    jobs = json.loads(as_json.stdout)["jobs"]
    assert {j["id"] for j in jobs} == {str(i) for i in ids}
    assert {"tags", "errors", "args", "meta", "scheduled_at"} <= set(jobs[0])


def test_a_short_id_names_its_job_in_every_command_taking_an_id(
    db: Database, target: Target
) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    short = str(job_id)[-8:]
    for argv in (
        ["job", short],
        ["explain", short.upper()],
        ["wake", str(job_id)[-12:]],
        ["retry", short],
        ["cancel", short, "--yes"],
    ):
        result = cli(target, *argv, "--json")
        assert result.exit_code in (0, 4), (argv, result.output)
        assert str(job_id) in result.stdout, argv  # resolved to the full id
    assert get_job(db, job_id).state.value == "cancelled"  # type: ignore[union-attr]
    absent = cli(target, "job", "deadbeef")
    assert absent.exit_code == 3 and "no job id ends with deadbeef" in absent.stderr
    too_short = cli(target, "job", "beef")
    assert too_short.exit_code == 2


def test_an_ambiguous_short_id_is_refused_naming_the_jobs(db: Database, target: Target) -> None:
    twins = [uuid.UUID(f"{n:08x}-0000-7000-8000-00000000beef") for n in (1, 2)]
    for twin in twins:
        made = enqueue(db, JobBuilder("ok", {})).id
        with db.begin() as conn:  # ids as a collision would leave them
            conn.execute(sa.update(db.tables.job).where(db.tables.job.c.id == made).values(id=twin))
    result = cli(target, "job", "0000beef", "--json")
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert "ambiguous" in error["message"] and sorted(error["details"]["matches"]) == [
        str(t) for t in twins
    ]
    assert cli(target, "job", "00000000beef").exit_code == 2  # all 12 digits: still both
    assert cli(target, "job", str(twins[0])).exit_code == 0


def _kickside(*argv: str, env: dict[str, str] | None = None, **kwargs: Any) -> str:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    if env is None or "COLUMNS" not in env:
        full.pop("COLUMNS", None)
    done = subprocess.run(
        [sys.executable, "-m", "kickside_tui.cli", *argv],
        capture_output=True,
        text=True,
        env=full,
        cwd=ROOT,
        timeout=60,
        check=True,
        **kwargs,
    )
    return done.stdout


def test_piped_output_is_unpadded_whole_lines_and_respects_columns(
    db: Database, target: Target
) -> None:
    ids = workload(db)
    piped = _kickside(*target.cli_args(), "jobs")
    lines = piped.splitlines()
    assert len(lines) == 1 + len(ids) and all(line == line.rstrip() for line in lines)
    assert "priority-customer" in piped and "last error" in lines[0]  # every column, whole
    detail = _kickside(*target.cli_args(), "job", str(ids[0]))
    assert all(line == line.rstrip() for line in detail.splitlines())
    assert max(len(line) for line in detail.splitlines()) < 213
    assert_fits(_kickside(*target.cli_args(), "jobs", env={"COLUMNS": "80"}), 80)


def test_a_terminal_of_80_columns_gets_a_table_that_fits(db: Database, target: Target) -> None:
    ids = workload(db)
    primary, replica = pty.openpty()
    fcntl.ioctl(replica, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm"}
    env.pop("COLUMNS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kickside_tui.cli", *target.cli_args(), "jobs"],
        stdout=replica,
        stderr=replica,
        stdin=replica,
        cwd=ROOT,
        env=env,
    )
    os.close(replica)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            out += chunk
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(primary)
        if proc.poll() is None:
            proc.kill()
    text = ANSI.sub("", out.decode()).replace("\r\n", "\n")
    rows = [line for line in text.splitlines() if line.strip()]
    table = [line for line in rows if not line.startswith("hidden to fit")]
    assert len(table) == 1 + len(ids), text
    assert all(len(line) <= 80 for line in table), text
    assert any(line.startswith("hidden to fit 80 columns") for line in rows), text


@pytest.mark.parametrize("columns", ["0", "abc", ""])
def test_a_meaningless_columns_value_is_ignored(db: Database, target: Target, columns: str) -> None:
    workload(db)
    result = runner.invoke(app, [*target.cli_args(), "jobs"], env={"COLUMNS": columns})
    assert result.exit_code == 0 and "priority-customer" in result.stdout
