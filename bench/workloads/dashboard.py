"""Workload 7: the dashboard over 1,000,000 jobs of history (PostgreSQL).

:mod:`bench.workloads.dashboard_data` fills the history in the database. Then each view's
refresh is timed as the screen runs it: the same :class:`~kickside_tui.adapter.Adapter` calls
with the same arguments (the Jobs view's refresh includes its match count and the detail pane
of the first job, as after a filter change; a search runs window after window as the view
does). Each view is refreshed once to warm up, then timed several times, in milliseconds of wall
time for the adapter call: the database's time plus decoding the rows. Each view's median, p95
and max are reported (:mod:`bench.refreshes`); the target, every refresh under 150 ms, is judged
on the slowest single timed refresh (``slowest_max_ms``). Timed apart, for the
record: one search window (the longest single query of a search), searches that read the whole
history, and the doctor, which the Metrics view runs in a worker of its own. Finally the real
app runs headless (``App.run_test``) in a subprocess over the same data, shows every view twice,
searches the Jobs view, and reports its resident memory (VmRSS, and the peak VmHWM) from
``/proc``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.refreshes import figures
from bench.workloads.common import Context, Measurement, median
from bench.workloads.dashboard_data import fill
from kickside_engine import JobState
from kickside_engine.clock import utcnow
from kickside_engine.control import JobFilter
from kickside_engine.control.search import scan_jobs
from kickside_tui.adapter import Adapter

HISTORY_JOBS = 1_000_000
ROUNDS = 5
EXTRA_ROUNDS = 3
PAGE = 50  # the Jobs view's page size
#: A needle in the error of about one job in twenty (its page fills in the first window), one
#: in the args of 20 jobs spread over the whole history, and one that matches nothing.
COMMON_NEEDLE = "timed out"
RARE_NEEDLE = "user4242@"
MISSING_NEEDLE = "no-such-needle"
ROOT = Path(__file__).resolve().parents[2]


def _jobs(flt: JobFilter) -> Callable[[Adapter], Any]:
    """The Jobs view's refresh after a filter change: its page, count and first job's detail."""

    def refresh(adapter: Adapter) -> Any:
        if flt.search:
            data = adapter.search(flt, limit=PAGE)
        else:
            data = adapter.jobs(flt, cursor=None, limit=PAGE, with_total=True)
        if data.page.jobs:  # the detail pane follows the cursor onto the first row
            adapter.job(data.page.jobs[0].id, adapter.now())
        return data

    return refresh


def _window(needle: str) -> Callable[[Adapter], Any]:
    """One window of a search: the longest single query a search runs."""
    return lambda a: scan_jobs(a.db, JobFilter(search=needle), limit=PAGE)


#: Each view's refresh, as its screen's ``fetch`` (and, for Jobs, the detail pane) runs it.
REFRESHES: dict[str, Callable[[Adapter], Any]] = {
    "overview": lambda a: a.overview(a.now()),
    "jobs": _jobs(JobFilter()),
    "jobs_filtered": _jobs(JobFilter(states=(JobState.RETRYABLE,), queues=("mailers",))),
    "jobs_search": _jobs(JobFilter(search=COMMON_NEEDLE)),
    "search_window": _window(MISSING_NEEDLE),
    "slots": lambda a: a.slots(a.now()),
    "leases": lambda a: a.leases(a.now()),
    "capacity": lambda a: a.capacity(a.now()),
    "metrics": lambda a: a.metrics(a.now()),
    "ops": lambda a: a.ops(a.now()),
}
#: Not refreshes, timed for the record: a search through the whole history (window after
#: window, shown as it goes) and the doctor (in a worker of its own, every 15th refresh).
EXTRAS: dict[str, Callable[[Adapter], Any]] = {
    "search_rare_total": _jobs(JobFilter(search=RARE_NEEDLE)),
    "search_miss_total": _jobs(JobFilter(search=MISSING_NEEDLE)),
    "doctor": lambda a: a.health(a.now()),
}


def time_calls(
    adapter: Adapter, calls: dict[str, Callable[[Adapter], Any]], rounds: int = ROUNDS
) -> dict[str, list[float]]:
    """Milliseconds of each call, ``rounds`` times after a warm-up."""
    timings: dict[str, list[float]] = {}
    for name, call in calls.items():
        call(adapter)
        samples = []
        for _ in range(rounds):
            began = time.perf_counter()
            call(adapter)
            samples.append((time.perf_counter() - began) * 1000)
        timings[name] = samples
    return timings


def measure_rss(args: list[str]) -> dict[str, float]:
    """The headless dashboard's resident memory in MB, from its own process."""
    proc = subprocess.run(
        [sys.executable, "-m", "bench.workloads.dashboard_rss", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"the headless dashboard failed: {last}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def dashboard(ctx: Context) -> Measurement:
    """Each view's refresh in ms at 1,000,000 jobs (median, p95, max), and the dashboard's
    resident memory."""
    if ctx.target.backend != "postgresql":
        raise ValueError("the dashboard workload generates its history on PostgreSQL")
    n = ctx.count(HISTORY_JOBS)
    db = ctx.target.open()
    try:
        ctx.progress(f"dashboard: generating {n} jobs of history")
        began = time.perf_counter()
        fill(db, n, utcnow())
        generated = time.perf_counter() - began
        ctx.progress("dashboard: timing each view's refresh")
        adapter = Adapter(db)
        timings = time_calls(adapter, REFRESHES)
        ctx.progress("dashboard: timing a search through the whole history, and the doctor")
        extras = time_calls(adapter, EXTRAS, EXTRA_ROUNDS)
    finally:
        db.dispose()
    ctx.progress("dashboard: resident memory of the headless app")
    memory = measure_rss(ctx.target.args())
    runs: list[dict[str, float]] = [
        {f"{name}_ms": samples[i] for name, samples in timings.items()} for i in range(ROUNDS)
    ]
    metrics = {f"{name}_ms": median(samples) for name, samples in timings.items()}
    metrics["max_refresh_ms"] = max(metrics.values())  # the slowest view's median
    metrics.update(figures(runs))  # each view's p95 and max, and the slowest of them
    metrics.update({f"{name}_ms": median(samples) for name, samples in extras.items()})
    metrics["rss_mb"] = memory["rss_mb"]
    metrics["peak_rss_mb"] = memory["peak_rss_mb"]
    runs.append({"generate_s": generated})
    return Measurement(
        workload="dashboard",
        backend=ctx.target.backend,
        params={"jobs": n, "rounds": ROUNDS, "extra_rounds": EXTRA_ROUNDS},
        metrics=metrics,
        runs=runs,
        details={"views_visited": memory.get("views", 0)},
    )
