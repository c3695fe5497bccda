"""``python -m bench.write_cost`` drains every variant completely on both backends and prints
its figures (it never asserts on timings); an unknown variant is a one-line usage error."""

from __future__ import annotations

import re

import psycopg
import pytest

from bench.peers.runner import conninfo
from bench.write_cost import POSTGRESQL_ONLY, VARIANTS

from ..conftest import PG_URL, require_postgres
from .scripts import Ran, run_script

pytestmark = pytest.mark.slow


def _run(*args: str) -> Ran:
    return run_script("bench.write_cost", *args)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_every_variant_drains_its_jobs_and_reports_its_figures(backend: str) -> None:
    if backend == "postgresql":
        require_postgres()
    result = _run("--backend", backend, "--database-url", PG_URL, "--jobs", "450", "--rounds", "1")
    assert result.returncode == 0, result.stderr
    rows = dict(re.findall(r"^\| (\w+) \| ([\d.]+) \(", result.stdout, re.MULTILINE))
    expected = set(VARIANTS) if backend == "postgresql" else set(VARIANTS) - POSTGRESQL_ONLY
    assert set(rows) == expected
    assert all(float(us) > 0 for us in rows.values())
    if backend == "postgresql":
        assert "| variant | wall | server_cpu |" in result.stdout
        with psycopg.connect(conninfo(PG_URL)) as conn:
            left = conn.execute(
                # Its own schema: other tests' scripts may be running beside it.
                "SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                (f"bench_write_cost_{result.pid}",),
            ).fetchone()
        assert left == (0,)


def test_an_unknown_variant_is_refused() -> None:
    result = _run("no_such_thing")
    assert result.returncode == 2
    assert "unknown variant 'no_such_thing'" in result.stderr


def test_a_postgresql_variant_on_sqlite_is_refused() -> None:
    result = _run("--backend", "sqlite", "base", "updated_at_when")
    assert result.returncode == 2
    assert "'updated_at_when' is for PostgreSQL only" in result.stderr
