"""The SQLite baseline of the single enqueue: Kickside's own statement on sqlite3, alone.

SQLite only, as Huey is: the baseline is the ceiling of the SQLite single-enqueue figure (the
PostgreSQL one is pgbench's, tested with the harness's quick run). It never asserts on timings.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench import machine
from bench.targets import sqlite_target
from kickside_engine import Database, JobBuilder, get_job


@pytest.mark.parametrize("mode", ["normal", "full"])
def test_the_ceiling_runs_the_statement_insert_sends_at_the_urls_durability(
    tmp_path: Path, mode: str
) -> None:
    path = tmp_path / "ceiling.sqlite3"
    with sqlite_target(path, mode) as target:
        sent: list[str] = []
        db = Database.from_url(target.url)
        try:
            with db.engine.connect() as conn:
                raw = conn.connection.dbapi_connection
                assert raw is not None
                raw.set_trace_callback(sent.append)
            job = JobBuilder("noop", {}).insert(db)  # on the pooled connection traced above
            assert get_job(db, job.id).queue == "default"
        finally:
            db.dispose()
        inserts = [sql for sql in sent if sql.startswith("INSERT INTO kickside_job")]
        assert len(inserts) == 1

        ceiling = machine.sqlite_enqueue_ceiling(target.url, rounds=2)

        assert ceiling["synchronous"] == mode
        assert len(ceiling["rounds"]) == 2 and ceiling["tps"] > 0
        # The statement is the one insert sent (sqlite3 traces it with its values in place).
        assert inserts[0].startswith(ceiling["statement"].split(" VALUES ")[0] + " VALUES (")
        with sqlite3.connect(path) as check:  # the rows it wrote are gone again
            assert check.execute("SELECT count(*) FROM kickside_job").fetchone() == (0,)
