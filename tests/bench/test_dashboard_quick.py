"""Workload 7 runs end to end on a small history and reports every figure it documents.

A smoke test of ``bench.workloads.dashboard`` on PostgreSQL: it asserts the measurement's shape
and that the generated history holds what the workload promises, never on timings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.targets import Target as BenchTarget
from bench.workloads.common import Context
from bench.workloads.dashboard import EXTRAS, REFRESHES, dashboard
from kickside_engine import Database, JobState
from kickside_engine.control.counts import state_counts

from ..conftest import Target

pytestmark = pytest.mark.slow

SCALE = 1 / 200  # 5,000 jobs


def test_the_dashboard_workload_measures_every_view(
    db: Database, target: Target, tmp_path: Path
) -> None:
    if not db.is_postgresql:
        pytest.skip("workload 7 generates its history on PostgreSQL")
    ctx = Context(
        target=BenchTarget("postgresql", target.url, target.schema), scale=SCALE, workdir=tmp_path
    )
    measured = dashboard(ctx)
    assert measured.error is None and measured.params["jobs"] == 5_000
    wanted = {f"{name}_ms" for name in (*REFRESHES, *EXTRAS)}
    wanted |= {f"{name}_{figure}_ms" for name in REFRESHES for figure in ("p95", "max")}
    wanted |= {"max_refresh_ms", "slowest_p95_ms", "slowest_max_ms", "rss_mb", "peak_rss_mb"}
    assert set(measured.metrics) == wanted
    assert all(value > 0 for value in measured.metrics.values())
    m = measured.metrics
    for name in REFRESHES:  # each from the timed refreshes kept in runs
        assert m[f"{name}_ms"] <= m[f"{name}_p95_ms"] <= m[f"{name}_max_ms"], name
        assert m[f"{name}_max_ms"] == max(run[f"{name}_ms"] for run in measured.runs[:-1])
    assert m["slowest_max_ms"] == max(m[f"{name}_max_ms"] for name in REFRESHES)
    assert m["max_refresh_ms"] <= m["slowest_p95_ms"] <= m["slowest_max_ms"]
    assert measured.details["views_visited"] == 15
    counts = state_counts(db)
    assert sum(sum(c.values()) for c in counts.values()) == 5_000
    assert len(counts) == 6
    for state in (JobState.COMPLETED, JobState.AVAILABLE, JobState.EXECUTING):
        assert sum(c[state] for c in counts.values()) > 0, state
