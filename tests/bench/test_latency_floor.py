"""``python -m bench.latency_floor`` measures both placements on a real PostgreSQL server and
prints their figures (it never asserts on timings)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from ..conftest import PG_URL, require_postgres

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_the_floor_runs_both_placements_and_leaves_no_table() -> None:
    require_postgres()
    result = subprocess.run(
        [sys.executable, "-m", "bench.latency_floor", "--database-url", PG_URL, "--jobs", "20"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = re.findall(
        r"^\| (inline|pipe) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|", result.stdout, re.M
    )
    assert [r[0] for r in rows] == ["inline", "pipe"], result.stdout
    for _, call, p50, p99 in rows:
        assert float(call) > 0 and 0 < float(p50) <= float(p99)
    with psycopg.connect(PG_URL.replace("postgresql+psycopg://", "postgresql://")) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'kickside_latency_floor%'"
        ).fetchone()
    assert left == (0,)
