"""A worker under a role (or SQLite file) that may only read: one line that says what to grant.

The pool's first write (registering its node) is refused; the worker exits 1 with that one
line, no traceback and no "unexpected error". On PostgreSQL, granting what the line says is
enough for the same role to run jobs.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, JobState, enqueue, get_job

from ..conftest import PG_URL, Target
from ..support.processes import ROOT, start_worker, stop, wait_for
from .test_least_privilege import READER_PASSWORD
from .test_least_privilege import reader as reader  # the fixture, for this module

pytestmark = pytest.mark.slow


def test_a_worker_that_may_not_write_says_what_to_grant_in_one_line(
    db: Database, reader: Target, tmp_path: Path
) -> None:
    waiting = enqueue(db, JobBuilder("noop", {}))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kickside_tui.cli",
            *reader.cli_args(),
            "worker",
            "--app",
            "tests.support.pool_app",
            "--queues",
            "default:2",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    (line,) = lines
    assert line.startswith("error: permission denied"), line
    assert READER_PASSWORD not in proc.stderr + proc.stdout
    if reader.backend == "sqlite":
        assert "open it without mode=ro" in line, line
        return
    grants = re.findall(r'GRANT [^;]+? TO "[^"]+"', line)
    assert len(grants) == 2, line  # tables, and the sequences of their ids
    admin = sa.create_engine(PG_URL)
    try:
        with admin.begin() as conn:
            for grant in grants:
                conn.exec_driver_sql(grant)
    finally:
        admin.dispose()
    pool = start_worker(reader.cli_args(), log=tmp_path / "pool.out")
    try:
        wait_for(
            lambda: get_job(db, waiting.id).state is JobState.COMPLETED,  # type: ignore[union-attr]
            90,
            "the granted role's pool to run the job",
        )
    finally:
        assert stop(pool) == 0, (tmp_path / "pool.out").read_text()[-3000:]
