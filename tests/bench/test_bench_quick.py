"""The benchmark harness runs end to end (``--quick``) and writes a well-formed results JSON.

A smoke test of the harness, on both backends: it never asserts on timings, only that the
command succeeds and its output has the documented shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from ..conftest import PG_URL, Target, _drop_schema, require_postgres, schema_exists

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ("bulk_enqueue", "single_enqueue")


def _run_quick(
    target: Target, results: Path, *extra: str, only: tuple[str, ...] = WORKLOADS
) -> subprocess.CompletedProcess[str]:
    """``bench.run --quick`` of ``only`` on ``target``, Kickside alone, results in ``results``."""
    if target.backend == "postgresql":
        assert target.schema is not None
        where = ["--database-url", target.url, "--schema", target.schema]
    else:
        where = ["--sqlite-path", target.url.removeprefix("sqlite:///")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.run",
            "--quick",
            "--only",
            ",".join(only),
            "--backend",
            target.backend,
            "--results-dir",
            str(results),
            "--no-peers",
            "--no-plot",
            *where,
            *extra,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def test_quick_run_writes_a_well_formed_results_document(target: Target, tmp_path: Path) -> None:
    results = tmp_path / "results"
    proc = _run_quick(target, results)
    assert proc.returncode == 0, proc.stderr[-4000:]

    (json_file,) = results.glob("*.json")
    (md_file,) = results.glob("*.md")
    assert md_file.stem == json_file.stem
    assert not list(results.glob("*.tmp"))
    doc = json.loads(json_file.read_text())
    assert doc["format"] == "kickside-bench/1"
    assert doc["quick"] is True and 0 < doc["scale"] < 1
    assert doc["backends"] == [target.backend]
    assert doc["machine"]["cpu_count"] >= 1 and len(doc["machine"]["load_average"]) == 3
    assert isinstance(doc["warnings"], list)
    assert doc["versions"]["kickside"] and doc["versions"]["sqlite"]
    assert doc["command"].startswith("python -m bench.run --quick")
    if target.backend == "postgresql":  # pgbench is optional: a figure, or why there is none
        for baseline in ("pgbench_insert", "pgbench_enqueue", "pgbench_update"):
            pgbench = doc["baselines"][baseline]
            assert _number(pgbench["tps"]) or pgbench["reason"]
        # Python's own insert rate needs no pgbench: always a figure.
        assert _number(doc["baselines"]["psycopg_insert"]["tps"])
    else:  # the ceiling of a one-commit enqueue of Kickside's row, at the run's durability
        ceiling = doc["baselines"]["sqlite_enqueue"]
        assert _number(ceiling["tps"]) and ceiling["synchronous"] == doc["sqlite_synchronous"]
        assert ceiling["statement"].startswith("INSERT INTO kickside_job (id, kind, state,")
        assert "SQLite single enqueue at NORMAL: Kickside's statement alone" in proc.stdout

    entries = {(e["system"], e["backend"], e["workload"]): e for e in doc["results"]}
    assert set(entries) == {("kickside", target.backend, w) for w in WORKLOADS}
    for entry in entries.values():
        assert entry["error"] is None
        assert entry["params"]["jobs"] > 0
        assert _number(entry["metrics"]["jobs_per_s"])
        assert entry["runs"] and all(_number(run["seconds"]) for run in entry["runs"])
    row = f"| kickside {doc['versions']['kickside']} | {target.backend} |"
    assert row in md_file.read_text() and row in proc.stdout
    if target.backend == "postgresql":  # the run's schema is thrown away
        assert target.schema is not None
        assert not schema_exists(target.schema)


def test_quick_multi_node_runs_each_job_once_across_pool_processes(tmp_path: Path) -> None:
    require_postgres()
    target = Target("postgresql", PG_URL, f"kst_{uuid.uuid4().hex[:16]}")
    results = tmp_path / "results"
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.run",
                "--quick",
                "--only",
                "multi_node",
                "--pool-counts",
                "1,2",  # the full run's 4 pools take too long to start for CI
                "--backend",
                "postgresql",
                "--database-url",
                target.url,
                "--schema",
                str(target.schema),
                "--results-dir",
                str(results),
                "--no-peers",
                "--no-pgbench",
                "--no-plot",
            ],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        _drop_schema(str(target.schema))
    assert proc.returncode == 0, proc.stderr[-4000:]
    (json_file,) = results.glob("*.json")
    (entry,) = json.loads(json_file.read_text())["results"]
    assert entry["workload"] == "multi_node" and entry["error"] is None
    metrics, jobs = entry["metrics"], entry["params"]["jobs"]
    assert _number(metrics["jobs_per_s_1_pools"]) and _number(metrics["jobs_per_s_2_pools"])
    assert [run["pools"] for run in entry["runs"]] == [1, 2]
    assert all(run["executions"] == jobs for run in entry["runs"])  # every job ran exactly once
    assert metrics["concurrent_duplicates"] == 0 and metrics["extra_executions"] == 0
    assert metrics["missing"] == 0 and metrics["history_concurrent_duplicates"] == 0
    assert metrics["history_extra_runs"] == 0
    assert "| 6 | concurrent duplicate executions |" in proc.stdout
    assert "| 6 | throughput, 2 pools / 1 pool |" in proc.stdout


def test_an_unknown_workload_is_a_usage_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.run", "--quick", "--only", "no_such_workload"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown workload no_such_workload" in proc.stderr


def test_quick_keyed_claims_claim_every_admissible_key(target: Target, tmp_path: Path) -> None:
    proc = _run_quick(target, tmp_path / "keyed", "--no-pgbench", only=("keyed_claims",))
    assert proc.returncode == 0, proc.stderr[-4000:]
    (json_file,) = (tmp_path / "keyed").glob("*.json")
    (entry,) = json.loads(json_file.read_text())["results"]
    assert entry["error"] is None
    # a's head and every other key's job, whatever the backlog ahead of them.
    assert entry["metrics"]["jobs_claimed"] == entry["params"]["keys"] + 1
    assert all(_number(entry["metrics"][m]) for m in ("claim_p50_ms", "empty_claim_ms"))


def test_quick_rate_limits_admit_exactly_the_rate_per_window(
    target: Target, tmp_path: Path
) -> None:
    proc = _run_quick(target, tmp_path / "rated", "--no-pgbench", only=("rate_limits",))
    assert proc.returncode == 0, proc.stderr[-4000:]
    (json_file,) = (tmp_path / "rated").glob("*.json")
    (entry,) = json.loads(json_file.read_text())["results"]
    assert entry["error"] is None
    assert [run["admitted"] for run in entry["runs"]] == [entry["params"]["rate_per_min"]] * 3
    assert all(_number(entry["metrics"][m]) for m in ("claim_ms_per_job", "cost_ratio"))


def test_quick_async_drains_run_on_an_async_executor(tmp_path: Path) -> None:
    require_postgres()
    target = Target("postgresql", PG_URL, f"kst_{uuid.uuid4().hex[:16]}")
    results = tmp_path / "results"
    try:
        proc = _run_quick(target, results, "--no-pgbench", only=("async_drain", "io_drain"))
    finally:
        _drop_schema(str(target.schema))
    assert proc.returncode == 0, proc.stderr[-4000:]
    (json_file,) = results.glob("*.json")
    entries = {e["workload"]: e for e in json.loads(json_file.read_text())["results"]}
    assert set(entries) == {"async_drain", "io_drain"}
    for entry in entries.values():
        assert entry["error"] is None and _number(entry["metrics"]["jobs_per_s"])
        assert entry["details"]["states_after_last_run"] == {"completed": entry["params"]["jobs"]}
        assert "1 async executor" in entry["details"]["executors"]
    io = entries["io_drain"]
    assert io["params"]["concurrency"] == 200 and io["params"]["limit_jobs_per_s"] == 20000
    assert 0 < io["metrics"]["limit_fraction"] < 1
    assert "| 10b | I/O-bound drain, share of the Little's-law limit (20,000/s) |" in proc.stdout


def test_quick_workflows_release_every_step_and_compare_with_plain_jobs(
    target: Target, tmp_path: Path
) -> None:
    proc = _run_quick(target, tmp_path / "flows", "--no-pgbench", only=("workflows",))
    assert proc.returncode == 0, proc.stderr[-4000:]
    (json_file,) = (tmp_path / "flows").glob("*.json")
    (entry,) = json.loads(json_file.read_text())["results"]
    assert entry["error"] is None
    metrics = entry["metrics"]
    for name in ("final_release_max_ms", "leaf_settle_p99_ms", "fanout_release_ms", "cost_ratio"):
        assert _number(metrics[name]), name
    assert "| 11 |" in proc.stdout and "workflow job / plain job" in proc.stdout


def test_quick_otel_cost_drains_traced_and_untraced(target: Target, tmp_path: Path) -> None:
    proc = _run_quick(target, tmp_path / "otel", "--no-pgbench", only=("otel_cost",))
    assert proc.returncode == 0, proc.stderr[-4000:]
    (json_file,) = (tmp_path / "otel").glob("*.json")
    (entry,) = json.loads(json_file.read_text())["results"]
    assert entry["error"] is None
    metrics = entry["metrics"]
    for name in ("plain_jobs_per_s", "traced_jobs_per_s", "plain_enqueue_us", "traced_enqueue_us"):
        assert _number(metrics[name]) and metrics[name] > 0, name
    for name in ("plain_cpu_us_per_job", "traced_cpu_us_per_job"):
        # CPU is read from /proc in 10 ms ticks: a quick run's few jobs on a fast machine can
        # take less than one, and read 0.
        value = metrics[name]
        assert isinstance(value, int | float) and not isinstance(value, bool), name
        assert value >= 0, name
    # Tracing's cost is a difference of two noisy medians: in a quick run it can come out
    # below zero, so the test checks that it is that difference, not its sign.
    assert metrics["tracing_cpu_us_per_job"] == pytest.approx(
        metrics["traced_cpu_us_per_job"] - metrics["plain_cpu_us_per_job"]
    )
    assert "| 22 |" in proc.stdout and "tracing's CPU per job" in proc.stdout
