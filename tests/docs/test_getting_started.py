"""The getting-started page, run command by command as a reader would: its files saved in a
fresh folder, each console line run in order. A `kickside worker` line starts the pool in the
background (the reader's first terminal); the lines after it wait until the pool has run every
due job, and the pool is stopped with Ctrl-C (SIGINT) at the end of its section, exiting 0.

The SQLite section runs on the embedded default; the PostgreSQL section on the test PostgreSQL
server (its `export` line replaced by the test database's URL and a schema of its own).
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kickside_engine import Database, JobState, connect_database
from kickside_engine.control import list_slots, state_counts

from ..conftest import Target
from ..support.processes import wait_for
from .support import DOCS, EXAMPLES, blocks, example_env, run

PAGE = DOCS / "getting-started.md"


def section(title: str) -> tuple[list[str], list[str]]:
    """The example files (snippet paths) and the console lines of one ``##`` section."""
    text = PAGE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end > 0 else len(text)]
    files = re.findall(r'^--8<-- "([^"]+)"$', body, re.MULTILINE)
    lines = [
        line.split("  #", 1)[0].strip()
        for block in blocks(PAGE)
        if block.lang == "console" and block.body in body
        for line in block.body.splitlines()
        if line.strip()
    ]
    return files, lines


def due(db: Database) -> int:
    """Jobs a pool would still claim or is running."""
    counts = state_counts(db)
    return sum(q[JobState.AVAILABLE] + q[JobState.EXECUTING] for q in counts.values())


def settle(pool: subprocess.Popen[str], db: Database) -> None:
    """Wait until the pool has run every due job (it keeps running)."""
    wait_for(lambda: due(db) == 0 or pool.poll() is not None, 60, "the pool to run every job")
    assert pool.poll() is None, pool.communicate()[0]


def run_section(
    title: str, tmp_path: Path, env: dict[str, str], db_url: str | None, schema: str | None
) -> Database:
    files, lines = section(title)
    for name in files:
        (tmp_path / Path(name).name).write_text((EXAMPLES / name).read_text())
    pool: subprocess.Popen[str] | None = None
    db: Database | None = None
    try:
        for line in lines:
            argv = shlex.split(line)
            if argv[0] == "export":
                assert argv[1].startswith("KICKSIDE_DATABASE_URL=postgresql+psycopg://"), line
                continue  # the test's own database instead (env)
            if argv[0] == "python":
                argv[0] = sys.executable
            if argv[:2] == ["kickside", "worker"]:
                pool = subprocess.Popen(
                    argv,
                    cwd=tmp_path,
                    env=env,
                    text=True,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                )
                continue
            if pool is not None:
                db = db or connect_database(db_url, schema=schema)
                settle(pool, db)
            run(argv, tmp_path, env)
        if pool is not None:
            db = db or connect_database(db_url, schema=schema)
            settle(pool, db)
            pool.send_signal(signal.SIGINT)
            output = pool.communicate(timeout=60)[0]
            assert pool.returncode == 0, output
            pool = None
        return db or connect_database(db_url, schema=schema)
    finally:
        if pool is not None:
            pool.kill()
            pool.communicate()


def test_five_minutes_on_sqlite(tmp_path: Path) -> None:
    env = example_env(tmp_path, tmp_path)
    db = run_section(
        "Five minutes on SQLite", tmp_path, env, f"sqlite:///{tmp_path}/kickside.sqlite3", None
    )
    try:
        assert state_counts(db)["default"][JobState.COMPLETED] == 1
    finally:
        db.dispose()


@pytest.mark.parametrize("backend", ["postgresql"], indirect=True)
def test_postgresql_a_slot_job_and_a_capacity_group(target: Target, tmp_path: Path) -> None:
    extra = {"KICKSIDE_DATABASE_URL": target.url}
    if target.schema:
        extra["KICKSIDE_SCHEMA"] = target.schema
    env = example_env(tmp_path, tmp_path, **extra)
    db = run_section(
        "PostgreSQL, a slot job and a capacity group", tmp_path, env, target.url, target.schema
    )
    try:
        slots = {s.key: s for s in list_slots(db, namespace="billing")}
        assert sorted(slots) == ["acct-001", "acct-002", "acct-003"]
        assert all(s.state is JobState.PARKED for s in slots.values())
        assert all(s.last_outcome is not None for s in slots.values())
        # the two woken slots ran twice; the capacity group never let a bank run two at once
        with db.read() as conn:
            from sqlalchemy import func, select

            runs = db.tables.job_run
            count = conn.execute(select(func.count()).select_from(runs)).scalar_one()
        assert count == 5
    finally:
        db.dispose()
