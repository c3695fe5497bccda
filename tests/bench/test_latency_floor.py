"""``python -m bench.latency_floor`` measures both placements on a real PostgreSQL server, with
a three-column row or with Kickside's writes, and prints their figures (it never asserts on
timings); every job it enqueues must start, and it leaves no table or schema behind."""

from __future__ import annotations

import re

import psycopg
import pytest

from bench.peers.runner import conninfo

from ..conftest import PG_URL, require_postgres
from .scripts import run_script

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("writes", ["three_columns", "kickside"])
def test_the_floor_runs_both_placements_and_leaves_nothing_behind(writes: str) -> None:
    require_postgres()
    result = run_script(
        "bench.latency_floor", "--database-url", PG_URL, "--jobs", "20", "--writes", writes
    )
    assert result.returncode == 0, result.stderr
    assert f"{writes} writes" in result.stdout
    rows = re.findall(
        r"^\| (inline|pipe) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", result.stdout, re.M
    )
    assert [r[0] for r in rows] == ["inline", "pipe"], result.stdout
    for _, call, p50, p99 in rows:
        assert float(call) > 0 and 0 < float(p50) <= float(p99)
    with psycopg.connect(conninfo(PG_URL)) as conn:
        # Its own, by the script's pid: other tests' scripts may be running beside it.
        left = conn.execute(
            "SELECT (SELECT count(*) FROM pg_tables WHERE tablename = %s), "
            "(SELECT count(*) FROM pg_namespace WHERE nspname = %s)",
            (f"kickside_latency_floor_{result.pid}", f"bench_latency_floor_{result.pid}"),
        ).fetchone()
    assert left == (0, 0)


def test_an_unknown_writes_shape_is_a_usage_error() -> None:
    result = run_script("bench.latency_floor", "--writes", "none")
    assert result.returncode == 2
    assert "invalid choice: 'none'" in result.stderr
