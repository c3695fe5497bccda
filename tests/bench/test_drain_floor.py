"""``python -m bench.drain_floor`` drains every job through each of its shapes, on both
backends, makes the writes it claims (the tool checks them) and prints its figures (it never
asserts on timings); it leaves no schema behind. A shape it does not have is a usage error."""

from __future__ import annotations

import re

import psycopg
import pytest

from bench.peers.runner import conninfo

from ..conftest import PG_URL, require_postgres
from .scripts import run_script

pytestmark = pytest.mark.slow

SHAPES = [
    ("postgresql", "io"),
    ("postgresql", "io", "--turns", "2", "--most-per-turn", "50"),
    ("postgresql", "sync"),
    ("postgresql", "sync", "--turns", "3"),
    # The minimal writes cost the server a few µs a job: enough jobs for its CPU to show.
    ("postgresql", "io", "--writes", "minimal", "--jobs", "4000"),
    ("postgresql", "sync", "--writes", "minimal", "--turns", "2", "--jobs", "4000"),
    ("postgresql", "io", "--writes", "lean", "--turns", "2", "--most-per-turn", "50"),
    ("postgresql", "sync", "--writes", "lean"),
    ("postgresql", "io", "--writes", "lease_only"),
    ("sqlite", "io", "--most-per-turn", "50"),
    ("sqlite", "sync"),
]


@pytest.mark.parametrize("shape", SHAPES, ids=["-".join(s).replace("--", "") for s in SHAPES])
def test_the_floor_drains_every_job_and_reports_its_figures(shape: tuple[str, ...]) -> None:
    backend, mode, *rest = shape
    if backend == "postgresql":
        require_postgres()
    result = run_script(
        "bench.drain_floor",
        # Enough jobs that every CPU figure (read from /proc in 10 ms ticks) shows.
        *("--database-url", PG_URL, "--jobs", "1500", "--rounds", "1"),
        *("--backend", backend, "--mode", mode, *rest),  # a shape's own --jobs comes last
    )
    assert result.returncode == 0, result.stderr
    figures = dict(re.findall(r"^  (\w+): ([\d,.]+) \(", result.stdout, re.MULTILINE))
    expected = {"jobs_per_s", "client_cpu_us"}
    if backend == "postgresql":
        expected.add("server_cpu_us")
    assert set(figures) == expected, result.stdout
    assert all(float(v.replace(",", "")) > 0 for v in figures.values())
    assert ("share of the Little's-law limit" in result.stdout) == (mode == "io")
    if backend == "postgresql":
        with psycopg.connect(conninfo(PG_URL)) as conn:
            left = conn.execute(
                # Its own schema: other tests' scripts may be running beside it.
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                (f"bench_drain_floor_{result.pid}",),
            ).fetchone()
        assert left == (0,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--turns", "5"), "invalid choice: 5"),
        (("--backend", "sqlite", "--turns", "2"), "SQLite has one writer: --turns 1 only"),
        (("--backend", "sqlite", "--writes", "minimal"), "--writes minimal is for PostgreSQL"),
        (("--backend", "sqlite", "--writes", "lean"), "--writes lean is for PostgreSQL"),
        (("--writes", "none"), "invalid choice: 'none'"),
    ],
)
def test_a_shape_it_does_not_have_is_a_usage_error(args: tuple[str, ...], message: str) -> None:
    result = run_script("bench.drain_floor", *args)
    assert result.returncode == 2
    assert message in result.stderr
