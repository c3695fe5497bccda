"""``python -m bench.sqlite_write_cost`` drains every variant completely and prints its figures
(it never asserts on timings); an unknown variant is a one-line usage error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.sqlite_write_cost", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_variant_drains_its_jobs_and_reports_a_figure() -> None:
    result = _run("--jobs", "450", "--rounds", "1")
    assert result.returncode == 0, result.stderr
    rows = dict(re.findall(r"^\| (\w+) \| ([\d.]+) \|", result.stdout, re.MULTILINE))
    assert set(rows) == {"base", "no_worker_state", "worker_only", "no_inserted_at", "no_runs"}
    assert all(float(us) > 0 for us in rows.values())


def test_an_unknown_variant_is_refused() -> None:
    result = _run("no_such_thing")
    assert result.returncode == 2
    assert "unknown variant 'no_such_thing'" in result.stderr
