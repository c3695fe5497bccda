"""What every workload shares: its context, its measurement, and small timing helpers."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from bench.interrupt import check_terminated
from bench.nodes import POOL_COUNTS
from bench.targets import Target
from bench.workloads.pools import PoolProcess, SharedPool
from kickside_engine import Database

SYSTEM = "kickside"


@dataclass(frozen=True)
class Context:
    """What a workload gets: where to run, how much to scale its counts, where to write."""

    target: Target
    scale: float
    workdir: Path
    progress: Callable[[str], None] = lambda _message: None
    shared_pool: SharedPool | None = None
    pool_counts: tuple[int, ...] = POOL_COUNTS

    def count(self, full: int, minimum: int = 10) -> int:
        """``full`` scaled down for ``--quick`` (never below ``minimum``)."""
        return scaled(full, self.scale, minimum)

    def pool(self) -> contextlib.AbstractContextManager[PoolProcess]:
        """A ready pool process (concurrency 10): the backend's shared one, else a fresh one."""
        if self.shared_pool is not None:
            return contextlib.nullcontext(self.shared_pool.get())
        return PoolProcess(self.target, log=self.workdir / f"pool-{self.target.backend}.log")


@dataclass
class Measurement:
    """One workload's figures on one backend, as written to the results JSON."""

    workload: str
    backend: str
    system: str = SYSTEM
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    runs: list[dict[str, float]] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict (snake_case keys, floats rounded to what is meaningful)."""
        return {
            "system": self.system,
            "backend": self.backend,
            "workload": self.workload,
            "params": self.params,
            "metrics": {k: _round(v) for k, v in self.metrics.items()},
            "runs": [{k: _round(v) for k, v in run.items()} for run in self.runs],
            "details": self.details,
            "error": self.error,
        }


def scaled(full: int, scale: float, minimum: int = 10) -> int:
    """A job count ``full`` times ``scale``, never below ``minimum``."""
    return max(minimum, round(full * scale))


def _round(value: float) -> float:
    return round(value, 4) if abs(value) < 100 else round(value, 1)


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0..100) by linear interpolation between closest ranks."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    """The median of ``values``."""
    return float(statistics.median(values))


def wait_until(
    condition: Callable[[], bool],
    *,
    timeout_seconds: float,
    what: str,
    interval_seconds: float = 0.05,
) -> float:
    """Poll ``condition`` until true; returns the monotonic time it was seen true.

    Raises ``TimeoutError`` naming ``what`` after ``timeout_seconds``.
    """
    deadline = time.monotonic() + timeout_seconds
    while True:
        check_terminated()
        if condition():
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_seconds:.0f}s waiting for {what}")
        time.sleep(interval_seconds)


def state_counts(db: Database) -> dict[str, int]:
    """How many jobs are in each state."""
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(select(job.c.state, func.count()).group_by(job.c.state)).all()
    return {str(state): int(count) for state, count in rows}


def wait_completed(db: Database, n: int, *, poll_seconds: float, what: str = "") -> float:
    """Wait until ``n`` jobs are completed, looking every ``poll_seconds`` (up to 120 s, or
    longer for many jobs); the monotonic time it was seen."""
    return wait_until(
        lambda: completed_count(db) >= n,
        timeout_seconds=max(120.0, n / 20),
        what=what or f"{n} completed jobs",
        interval_seconds=poll_seconds,
    )


def completed_count(db: Database) -> int:
    """How many jobs are completed."""
    job = db.tables.job
    with db.read() as conn:
        count = conn.execute(
            select(func.count()).select_from(job).where(job.c.state == "completed")
        ).scalar_one()
    return int(count)
