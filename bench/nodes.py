"""What workload 6 (multi-node) shares between Kickside's side and the peers' driver: the
executions logged by ``span`` jobs, the duplicates among them, and the workload's figures.

Standard library only: the peers' driver runs in its own virtual environment. A span line is
``job_id attempt begin_ns start_ns end_ns pid`` (wall-clock nanoseconds): ``begin`` is when the
execution was handed over (Kickside: its claim; a peer, which hands no claim time to its task:
the body's start), ``end`` when the body ended.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Span:
    """One execution of a job: from its hand-over to the end of its body."""

    job_id: str
    begin_ns: int
    end_ns: int


def write_span(path: str, job_id: object, attempt: int, begin_ns: int | None = None) -> None:
    """Append one execution's line (a single write: whole lines, even from many processes)."""
    started_ns = time.time_ns()
    begin = started_ns if begin_ns is None else begin_ns
    line = f"{job_id} {attempt} {begin} {started_ns} {time.time_ns()} {os.getpid()}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_spans(path: Path) -> list[Span]:
    """The executions logged in ``path`` (none when it does not exist)."""
    if not path.exists():
        return []
    spans = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 6:
            spans.append(Span(parts[0], int(parts[2]), int(parts[4])))
    return spans


def duplicates(spans: Iterable[Span], expected: int) -> dict[str, int]:
    """Executions, extra executions, jobs never executed, and concurrent duplicates.

    A concurrent duplicate is a pair of executions of one job whose intervals overlap.
    """
    by_job: dict[str, list[Span]] = defaultdict(list)
    executions = 0
    for span in spans:
        by_job[span.job_id].append(span)
        executions += 1
    concurrent = 0
    for group in by_job.values():
        if len(group) > 1:
            ordered = sorted(group, key=lambda s: s.begin_ns)
            for i, first in enumerate(ordered):
                concurrent += sum(1 for later in ordered[i + 1 :] if later.begin_ns <= first.end_ns)
    return {
        "executions": executions,
        "extra_executions": executions - len(by_job),
        "missing": max(0, expected - len(by_job)),
        "concurrent_duplicates": concurrent,
    }


#: The pool (worker process) counts of workload 6, added one after the other.
POOL_COUNTS = (1, 2, 4)
MULTI_JOBS = 40_000


def multi_node_metrics(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per pool count, the totals, and the most-pools-over-one-pool ratios.

    Each run has ``pools``, ``jobs_per_s``, ``pool_cpu_s_per_1000_jobs``, optionally
    ``pg_cpu_s_per_1000_jobs`` and ``cpu_s_per_1000_jobs`` (pools plus PostgreSQL), and the
    counts of :func:`duplicates`.
    """
    metrics: dict[str, float] = {}
    for run in runs:
        k = int(run["pools"])
        metrics[f"jobs_per_s_{k}_pools"] = run["jobs_per_s"]
        for name in ("cpu_s_per_1000_jobs", "pool_cpu_s_per_1000_jobs", "pg_cpu_s_per_1000_jobs"):
            if name in run:
                metrics[f"{name}_{k}_pools"] = run[name]
    for name in ("concurrent_duplicates", "extra_executions", "missing"):
        metrics[name] = sum(run[name] for run in runs)
    one, most = runs[0], runs[-1]
    metrics["max_pools"] = most["pools"]
    metrics["throughput_ratio"] = most["jobs_per_s"] / one["jobs_per_s"]
    cpu = "cpu_s_per_1000_jobs" if "cpu_s_per_1000_jobs" in one else "pool_cpu_s_per_1000_jobs"
    if one[cpu] > 0:
        metrics["cpu_ratio"] = most[cpu] / one[cpu]
    return metrics
