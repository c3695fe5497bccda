"""``python -m bench.drain_floor`` drains every job through each of its shapes on a real
PostgreSQL server, makes the writes it claims (the tool checks them) and prints its figures (it
never asserts on timings); it leaves no schema behind."""

from __future__ import annotations

import re

import psycopg
import pytest

from bench.peers.runner import conninfo

from ..conftest import PG_URL, require_postgres
from .scripts import run_script

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "shape",
    [
        ("--mode", "io"),
        ("--mode", "io", "--turns", "2", "--most-per-turn", "50"),
        ("--mode", "sync"),
        ("--mode", "sync", "--turns", "2"),
    ],
    ids=["io", "io-two-turns-capped", "sync", "sync-two-turns"],
)
def test_the_floor_drains_every_job_and_reports_its_figures(shape: tuple[str, ...]) -> None:
    require_postgres()
    result = run_script(
        "bench.drain_floor", *shape, "--database-url", PG_URL, "--jobs", "600", "--rounds", "1"
    )
    assert result.returncode == 0, result.stderr
    figures = dict(re.findall(r"^  (\w+): ([\d,.]+) \(", result.stdout, re.MULTILINE))
    assert set(figures) == {"jobs_per_s", "client_cpu_us", "server_cpu_us"}, result.stdout
    assert all(float(v.replace(",", "")) > 0 for v in figures.values())
    assert ("share of the Little's-law limit" in result.stdout) == ("io" in shape)
    with psycopg.connect(conninfo(PG_URL)) as conn:
        left = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench_drain_floor_%'"
        ).fetchone()
    assert left == (0,)


def test_a_bad_shape_is_a_usage_error() -> None:
    result = run_script("bench.drain_floor", "--turns", "3")
    assert result.returncode == 2
    assert "invalid choice: 3" in result.stderr
