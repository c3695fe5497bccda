"""The soak command runs end to end at a small size and writes its record.

A smoke test of ``python -m bench.soak``: two pools, the headless dashboard and the Pruner on
PostgreSQL. It asserts that the soak completes and that its JSON has the documented shape, never
on timings or on the verdict (a run this short cannot judge them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import PG_URL, require_postgres

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
JOBS = 2_000


def test_the_soak_completes_and_writes_its_record(tmp_path: Path) -> None:
    require_postgres()
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.soak",
            "--jobs",
            str(JOBS),
            "--pools",
            "2",
            "--concurrency",
            "3",
            "--sample-seconds",
            "1",
            "--retention-seconds",
            "2",
            "--backlog",
            "400",
            "--refresh-seconds",
            "0.5",
            "--minutes",
            "3",
            "--database-url",
            PG_URL,
            "--results-dir",
            str(results),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = results.glob("soak-*.json")
    record = json.loads(path.read_text())
    assert record["format"] == "kickside-soak/1"
    assert (record["enqueued"], record["finished"], record["timed_out"]) == (JOBS, JOBS, False)
    assert record["error"] is None and isinstance(record["warnings"], list)
    samples = record["samples"]
    assert samples and samples[-1]["finished"] == JOBS
    for sample in samples:
        assert set(sample) >= {"t_s", "jobs_per_s", "backlog", "job_rows", "run_rows", "rss_mb"}
        assert set(sample["rss_mb"]) == {"pool1", "pool1.exec", "pool2", "pool2.exec", "dashboard"}
        assert all(mb > 0 for mb in sample["rss_mb"].values())
    hosts = record["hosts"]
    assert sum(h["stats"].get("done", 0) for h in (hosts["pool1"], hosts["pool2"])) == JOBS
    assert hosts["dashboard"]["loads"] > 0
    assert "verdict" in record and "verdict:" in done.stdout
