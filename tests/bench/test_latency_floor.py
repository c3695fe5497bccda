"""``python -m bench.latency_floor`` measures both placements on a real PostgreSQL server and
prints their figures (it never asserts on timings)."""

from __future__ import annotations

import re

import psycopg
import pytest

from bench.peers.runner import conninfo

from ..conftest import PG_URL, require_postgres
from .scripts import run_script

pytestmark = pytest.mark.slow


def test_the_floor_runs_both_placements_and_leaves_no_table() -> None:
    require_postgres()
    result = run_script("bench.latency_floor", "--database-url", PG_URL, "--jobs", "20")
    assert result.returncode == 0, result.stderr
    rows = re.findall(
        r"^\| (inline|pipe) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", result.stdout, re.M
    )
    assert [r[0] for r in rows] == ["inline", "pipe"], result.stdout
    for _, call, p50, p99 in rows:
        assert float(call) > 0 and 0 < float(p50) <= float(p99)
    with psycopg.connect(conninfo(PG_URL)) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'kickside_latency_floor%'"
        ).fetchone()
    assert left == (0,)
