"""The harness's own logic, without a database: duplicate detection and the results table.

These never time anything: they feed made-up figures and check what the harness concludes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import refreshes, report
from bench.nodes import Span, duplicates, multi_node_metrics, read_spans, write_span


def test_overlapping_executions_of_one_job_are_a_concurrent_duplicate() -> None:
    spans = [
        Span("a", 100, 200),
        Span("a", 150, 300),  # began before the first ended
        Span("b", 100, 110),
        Span("b", 500, 510),  # a later, separate execution: extra, not concurrent
        Span("c", 0, 5),
    ]
    found = duplicates(spans, expected=4)
    assert found == {
        "executions": 5,
        "extra_executions": 2,
        "missing": 1,
        "concurrent_duplicates": 1,
    }


def test_every_overlapping_pair_of_executions_counts_once() -> None:
    mutual = [Span("a", 0, 100), Span("a", 10, 60), Span("a", 50, 70)]
    assert duplicates(mutual, expected=1)["concurrent_duplicates"] == 3
    # Both overlap the long one, not each other.
    nested = [Span("a", 10, 20), Span("a", 0, 100), Span("a", 50, 60)]
    assert duplicates(nested, expected=1)["concurrent_duplicates"] == 2


def test_spans_written_by_the_worker_are_read_back(tmp_path: Path) -> None:
    log = tmp_path / "spans"
    write_span(str(log), "job-1", 1, begin_ns=5)
    write_span(str(log), "job-2", 1)
    first, second = read_spans(log)
    assert (first.job_id, first.begin_ns) == ("job-1", 5) and first.end_ns >= first.begin_ns
    assert second.job_id == "job-2" and second.end_ns >= second.begin_ns
    assert read_spans(tmp_path / "missing") == []


def _run(pools: int, jobs_per_s: float, cpu: float) -> dict[str, float]:
    return {
        "pools": float(pools),
        "jobs_per_s": jobs_per_s,
        "pool_cpu_s_per_1000_jobs": cpu / 2,
        "pg_cpu_s_per_1000_jobs": cpu / 2,
        "cpu_s_per_1000_jobs": cpu,
        "concurrent_duplicates": 0.0,
        "extra_executions": float(pools - 1),
        "missing": 0.0,
    }


def test_multi_node_figures_compare_the_most_pools_with_one() -> None:
    metrics = multi_node_metrics([_run(1, 1000, 1.0), _run(2, 1100, 1.1), _run(4, 900, 1.5)])
    assert metrics["jobs_per_s_4_pools"] == 900
    assert metrics["throughput_ratio"] == 0.9
    assert metrics["cpu_ratio"] == 1.5
    assert metrics["extra_executions"] == 4
    assert metrics["concurrent_duplicates"] == 0


def _entry(system: str, workload: str, metrics: dict[str, float], **kw: Any) -> dict[str, Any]:
    return {
        "system": system,
        "backend": kw.get("backend", "postgresql"),
        "workload": workload,
        "params": kw.get("params", {"jobs": 10}),
        "metrics": metrics,
        "runs": [],
        "details": {},
        "error": kw.get("error"),
    }


def _doc(quick: bool) -> dict[str, Any]:
    return {
        "format": report.FORMAT,
        "started_at": "2026-11-30T00:00:00+00:00",
        "command": "python -m bench.run",
        "quick": quick,
        "scale": 0.05 if quick else 1.0,
        "machine": {"cpu_count": 2, "cpu_model": "test", "python": "3", "load_average": [0, 0, 0]},
        "warnings": [],
        "versions": {"kickside": "0.1.0", "peer_a": "1.0", "sqlite": "3"},
        "baselines": {
            "pgbench_insert": {"tps": 2000.0},
            "psycopg_insert": {"tps": 1700.0},
            "pgbench_enqueue": {"tps": 2500.0},
            "pgbench_update": {"tps": None, "reason": "pgbench is not installed"},
        },
        "results": [
            _entry("kickside", "drain", {"jobs_per_s": 3000.0}),
            _entry("peer_a", "drain", {"jobs_per_s": 1000.0}),
            _entry("kickside", "bulk_enqueue", {"jobs_per_s": 10000.0}),
            _entry("peer_a", "bulk_enqueue", {"jobs_per_s": 8000.0}),
            _entry("kickside", "single_enqueue", {"jobs_per_s": 1900.0}),
            _entry("kickside", "latency", {"p50_ms": 2.0, "p99_ms": 25.0}),
            _entry("peer_a", "latency", {}, error="TimeoutError: no start"),
            _entry(
                "kickside",
                "multi_node",
                {"jobs_per_s_1_pools": 1000.0, "concurrent_duplicates": 1.0, "cpu_ratio": 1.1},
            ),
            _entry("kickside", "drain", {"jobs_per_s": 800.0}, backend="sqlite"),
        ],
    }


def _line(markdown: str, start: str) -> list[str]:
    (line,) = [row for row in markdown.splitlines() if row.startswith(start)]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_the_table_shows_peers_ratios_and_each_target_met_or_missed() -> None:
    text = report.markdown(_doc(quick=False))
    header = _line(text, "| # |")
    assert header[3:6] == ["kickside", "peer_a 1.0", "kickside/peer_a"]
    assert header[-1] == "met"
    drain = _line(text, "| 3 | drain")
    assert drain[3:6] == ["3,000", "1,000", "3.00x"]
    assert drain[-2:] == ["3.00x peer_a", "pass"]  # ≥ 2x the fastest peer
    bulk = _line(text, "| 1 | bulk enqueue |")
    assert bulk[-2:] == ["1.25x peer_a", "MISS"]  # < 1.5x
    single = _line(text, "| 2 | single enqueue")
    assert single[-2:] == ["95%", "pass"]  # of pgbench's 2,000 inserts/s
    assert _line(text, "| 4 | latency p50")[-1] == "pass"
    p99 = _line(text, "| 4 | latency p99")
    assert p99[4] == "—" and p99[-1] == "MISS"  # the peer's latency failed: no figure
    assert _line(text, "| 6 | concurrent duplicate")[-1] == "MISS"
    assert _line(text, "| 6 | CPU per job, 4 pools")[-1] == "pass"
    assert _line(text, "| 8 | SQLite: drain")[3] == "800"
    assert _line(text, "| ref | pgbench: single-row INSERT")[3] == "2,000"
    assert _line(text, "| ref | pgbench: Kickside's single-enqueue statement")[3] == "2,500"
    assert (
        "Single enqueue: kickside 1,900/s = 95% of pgbench's trivial insert (2,000/s), 76% of "
        "pgbench running Kickside's own statement (2,500/s, the ceiling for this row)." in text
    )
    assert _line(text, "| ref | psycopg from Python: the same single-row INSERT")[3] == "1,700"
    assert "psycopg sending pgbench's trivial insert from Python reaches 1,700/s, 85% of" in text
    assert "n/a: pgbench is not installed" in _line(text, "| ref | pgbench: simple-update")[3]
    assert "peer_a postgresql latency: TimeoutError: no start" in text
    assert "history slowdown" not in text.split("Every figure")[1]  # not measured: no row


def test_a_quick_run_is_marked_as_a_smoke_test_not_a_measurement() -> None:
    text = report.markdown(_doc(quick=True))
    assert "A smoke test, not a measurement" in text
    assert _line(text, "| # |")[-1] == "smoke: met?"


def _dashboard_runs(slots_ms: list[float]) -> list[dict[str, float]]:
    """Five timed rounds of two views, then the generation time the workload appends."""
    runs: list[dict[str, float]] = [
        {"overview_ms": 40.0 + i, "slots_ms": ms} for i, ms in enumerate(slots_ms)
    ]
    return [*runs, {"generate_s": 30.0}]


def test_dashboard_figures_are_median_p95_and_max_per_view_from_the_runs() -> None:
    runs = _dashboard_runs([30.0, 31.0, 32.0, 33.0, 90.0])
    figures = refreshes.figures(runs)
    assert figures["overview_max_ms"] == 44.0 and figures["slots_max_ms"] == 90.0
    assert figures["slots_p95_ms"] == pytest.approx(33.0 + 0.8 * (90.0 - 33.0))
    assert figures["slowest_max_ms"] == 90.0
    assert figures["slowest_p95_ms"] == figures["slots_p95_ms"]
    assert "generate_p95_ms" not in figures and refreshes.figures([]) == {}
    spread = refreshes.spreads(runs)["slots"]
    assert (spread.samples, spread.median) == (5, 32.0)


def _dashboard_doc(slots_ms: list[float], *, stored: bool) -> dict[str, Any]:
    runs = _dashboard_runs(slots_ms)
    medians = {"overview_ms": 42.0, "slots_ms": sorted(slots_ms)[2]}
    metrics = {**medians, "max_refresh_ms": max(medians.values()), "peak_rss_mb": 100.0}
    if stored:  # a run that recorded them; older results only have the runs
        metrics.update(refreshes.figures(runs))
    doc = _doc(quick=False)
    doc["results"] = [
        {**_entry("kickside", "dashboard", metrics, params={"jobs": 1_000_000}), "runs": runs}
    ]
    return doc


@pytest.mark.parametrize("stored", [True, False])
def test_one_slow_refresh_misses_the_dashboard_target_though_every_median_is_fast(
    stored: bool,
) -> None:
    text = report.markdown(_dashboard_doc([30.0, 31.0, 32.0, 33.0, 160.0], stored=stored))
    slowest = _line(text, "| 7 | dashboard refresh, slowest single refresh (max)")
    assert slowest[3] == "160.0" and slowest[-3:] == ["≤ 150 ms", "", "MISS"]
    assert _line(text, "| 7 | dashboard refresh, slowest view's median")[3] == "42.0"
    assert _line(text, "| 7 | dashboard refresh, slowest view's p95")[3] == "134.6"
    assert "judged on the max, not the median" in text
    assert "Slowest single refresh: 160.0 ms (slots), over the target." in text
    assert _line(text, "| slots |") == ["slots", "32.0", "134.6", "160.0"]
    assert _line(text, "| overview |") == ["overview", "42.0", "43.8", "44.0"]
    fast = report.markdown(_dashboard_doc([30.0, 31.0, 32.0, 33.0, 140.0], stored=stored))
    assert _line(fast, "| 7 | dashboard refresh, slowest single refresh (max)")[-1] == "pass"
    assert "Slowest single refresh: 140.0 ms (slots), within the target." in fast


def test_the_async_rows_compare_each_system_and_give_the_share_of_the_io_limit() -> None:
    doc = _doc(quick=False)
    doc["versions"].update(pgqueuer="1.6.0", oban="0.7.0")
    doc["results"] += [
        _entry("kickside", "async_drain", {"jobs_per_s": 9000.0, "cpu_s_per_1000_jobs": 0.15}),
        _entry("pgqueuer", "async_drain", {"jobs_per_s": 4000.0, "cpu_s_per_1000_jobs": 0.16}),
        _entry("oban", "async_drain", {"jobs_per_s": 5000.0, "cpu_s_per_1000_jobs": 0.30}),
        _entry("kickside", "io_drain", {"jobs_per_s": 13000.0, "limit_fraction": 0.65}),
        _entry("pgqueuer", "io_drain", {"jobs_per_s": 14000.0, "limit_fraction": 0.70}),
        _entry("kickside", "async_latency", {"p50_ms": 3.0, "p99_ms": 25.0}),
        _entry("oban", "async_latency", {"p50_ms": 5.0, "p99_ms": 9.0}),
    ]
    text = report.markdown(doc)
    drain = _line(text, "| 10 | async drain, 1 pool")
    assert drain[-2:] == ["1.80x oban", "MISS"]  # < 2x the fastest peer (oban's 5,000)
    assert _line(text, "| 10 | async drain CPU")[-2:] == ["0.94x pgqueuer", "pass"]
    assert _line(text, "| 10b | I/O-bound drain (10 ms")[-2:] == ["0.93x pgqueuer", "MISS"]
    share = _line(text, "| 10b | I/O-bound drain, share")
    assert share[3] == "65%" and "70%" in share and share[-1] == "pass"  # every system's share
    assert _line(text, "| 10c | async latency p50")[-2:] == ["0.60x oban", "pass"]
    assert _line(text, "| 10c | async latency p99")[-1] == "MISS"


def test_the_peers_added_for_async_run_only_the_async_workloads() -> None:
    from bench import catalog
    from bench.peers import runner

    counts = catalog.peer_counts(catalog.by_name([]), 1 / 20)
    assert counts["io_drain"] == 2000 and counts["async_drain"] == 1000
    assert set(runner.counts_for("chancy", counts)) == set(runner.ASYNC_WORKLOADS)
    assert set(runner.counts_for("pgqueuer", counts)) == set(counts)
    assert "oban" in runner.IN_VENV312 and len(runner.IN_VENV312) == 1


def test_every_sqlite_figure_has_huey_beside_it_at_both_durabilities() -> None:
    doc = _doc(quick=True)
    doc["sqlite_synchronous"] = "normal"
    doc["versions"].update({"huey": "3.5.4", "huey-normal": "3.5.4"})
    for system, mode, rate in (("huey", "FULL", 400.0), ("huey-normal", "NORMAL", 1600.0)):
        entry = _entry(
            system,
            "drain",
            {"jobs_per_s": rate, "pool_cpu_s_per_1000_jobs": 0.5, "thread_jobs_per_s": 100.0},
            backend="sqlite",
        )
        entry["details"] = {"version": "3.5.4", "synchronous": mode}
        doc["results"].append(entry)
    for system, rows in (("kickside", 5.0), ("huey", 2.0)):
        doc["results"].append(
            _entry(system, "work_per_job", {"rows_written_per_job": rows}, backend="sqlite")
        )
    text = report.markdown(doc)
    header = _line(text, "| # |")
    assert header[3:7] == ["kickside", "huey 3.5.4", "huey-normal 3.5.4", "peer_a 1.0"]
    rows = _line(text, "| 26 | SQLite work per job: rows written")
    assert rows[3:8] == ["5.00", "2.00", "—", "—", "2.50x"]
    drain = _line(text, "| 8 | SQLite: drain, 1 pool")
    assert drain[3:7] == ["800", "400", "1,600", "—"]
    assert drain[7:9] == ["2.00x", "0.50x"]  # kickside/huey, kickside/huey-normal
    assert _line(text, "| 8 | SQLite: drain, Huey's thread workers")[3:5] == ["—", "100"]
    assert _line(text, "| 3 | drain")[4:6] == ["—", "—"]  # Huey has no PostgreSQL figures
    assert "SQLite durability (WAL, `synchronous`): kickside NORMAL, huey FULL, " in text
    assert "huey-normal NORMAL." in text
    assert "| huey 3.5.4 | sqlite |" in text


def test_huey_runs_on_sqlite_only_and_the_other_peers_on_postgresql_only() -> None:
    from bench.peers import runner

    assert "huey" in runner.PEERS and set(runner.SQLITE_PEERS) == {"huey"}
    assert runner.SQLITE_MODES == ("FULL", "NORMAL")
    assert set(runner.SQLITE_WORKLOADS) == {
        "bulk_enqueue",
        "single_enqueue",
        "drain",
        "latency",
        "work_per_job",
    }
    assert set(runner.SQLITE_WORKLOADS) >= runner.SQLITE_ONLY_WORKLOADS
    assert "huey==3.5.4" in runner.REQUIREMENTS.read_text().splitlines()


def test_sqlite_single_enqueue_is_read_against_its_statement_alone_and_huey_at_its_durability() -> (
    None
):
    doc = _doc(quick=False)
    doc["baselines"]["sqlite_enqueue"] = {"tps": 20_000.0, "synchronous": "normal"}
    doc["results"].append(
        _entry("kickside", "single_enqueue", {"jobs_per_s": 11_000.0}, backend="sqlite")
    )
    for system, mode, rate in (("huey", "FULL", 6_000.0), ("huey-normal", "NORMAL", 32_000.0)):
        entry = _entry(system, "single_enqueue", {"jobs_per_s": rate}, backend="sqlite")
        entry["details"] = {"synchronous": mode}
        doc["results"].append(entry)
    text = report.markdown(doc)
    assert (
        "SQLite single enqueue at NORMAL: Kickside's statement alone, on sqlite3, 20,000/s "
        "(50.0 µs a row); kickside 11,000/s, 55% of it; huey-normal (same durability) "
        "32,000/s: the statement alone is 0.62x its whole enqueue." in text
    )
    assert "huey (same durability)" not in text  # Huey at FULL is not at the same durability
    ceiling = _line(text, "| ref | SQLite: Kickside's single-enqueue statement")
    assert ceiling[3] == "20,000"


def test_without_the_sqlite_ceiling_there_is_no_sqlite_single_enqueue_note() -> None:
    assert "SQLite single enqueue at" not in report.markdown(_doc(quick=False))
