"""A pool in another process starts a job at once: NOTIFY on PostgreSQL, datagrams on SQLite.

The pools here poll every 30 s, so a job that starts within seconds of its enqueue was started
by a wake-up, not by the poll. The bound the tests check is generous (the documented figures
are milliseconds: docs/operating/sqlite.md); a lost wake-up costs one poll interval, never a job.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from kickside_engine import JobBuilder, migrate
from kickside_engine.slots import nudge_workers
from kickside_engine.store.notify import local_signal, wake_folder_of

from ..conftest import Target
from ..support.execlog import read_executions
from ..support.processes import ROOT, wait_for

pytestmark = pytest.mark.slow

SLOW_POLL_S = 30.0
#: Generous: a wake-up takes milliseconds, the poll would take 24 to 36 s here.
START_BOUND_S = 5.0
MEDIAN_BOUND_S = 0.25


def _spawn(target: Target, *args: str) -> subprocess.Popen[str]:
    schema = ["--schema", target.schema] if target.schema else []
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.wake_procs", *args[:1], target.url, *schema,
         *args[1:]],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )  # fmt: skip


class Pools:
    """Pool processes started for one test, stopped (stdin closed) at its end."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, poll_seconds: float = SLOW_POLL_S) -> None:
        proc = _spawn(self.target, "pool", "--poll", str(poll_seconds))
        self.procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", "the pool process did not start"

    def stop(self) -> None:
        for proc in self.procs:
            if proc.stdin is not None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()


@pytest.fixture
def pools(target: Target) -> Iterator[Pools]:
    db = target.open()
    migrate.upgrade(db)
    db.dispose()
    started = Pools(target)
    try:
        yield started
    finally:
        started.stop()


def _enqueue(target: Target, log: Path, count: int, interval_ms: int) -> subprocess.Popen[str]:
    return _spawn(
        target, "enqueue", "--log", str(log), "--count", str(count),
        "--interval-ms", str(interval_ms),
    )  # fmt: skip


def _sent(proc: subprocess.Popen[str]) -> dict[str, int]:
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    return {job_id: int(ns) for job_id, ns in (line.split() for line in out.splitlines())}


def _latencies(log: Path, sent: dict[str, int]) -> list[float]:
    """Seconds from each job's insert call to its start; every job started exactly once."""
    executions = wait_for(
        lambda: (found := read_executions(log)) and len(found) >= len(sent) and found,
        timeout=START_BOUND_S + 30,
        what=f"{len(sent)} jobs to start",
    )
    assert set(executions) == set(sent)
    assert all(len(runs) == 1 for runs in executions.values())
    return [(executions[j][0].start_ns - ns) / 1e9 for j, ns in sent.items()]


def test_a_job_enqueued_in_another_process_starts_without_waiting_for_the_poll(
    pools: Pools, tmp_path: Path
) -> None:
    pools.start()
    log = tmp_path / "exec.log"
    latencies = _latencies(log, _sent(_enqueue(pools.target, log, 20, 50)))
    assert max(latencies) < START_BOUND_S
    assert statistics.median(latencies) < MEDIAN_BOUND_S


def test_many_enqueuing_processes_wake_both_pools_and_every_job_runs_once(
    pools: Pools, tmp_path: Path
) -> None:
    pools.start()
    pools.start()
    log = tmp_path / "exec.log"
    enqueuers = [_enqueue(pools.target, log, 15, 30) for _ in range(3)]
    sent = {job: ns for proc in enqueuers for job, ns in _sent(proc).items()}
    latencies = _latencies(log, sent)
    assert len(latencies) == 45
    assert max(latencies) < START_BOUND_S
    assert statistics.median(latencies) < MEDIAN_BOUND_S
    ran_by = {run.ppid for runs in read_executions(log).values() for run in runs}
    assert len(ran_by) == 2, "both pools took jobs"


def test_nudge_workers_wakes_a_pool_in_another_process_on_sqlite(
    pools: Pools, tmp_path: Path
) -> None:
    if pools.target.backend != "sqlite":
        pytest.skip("NOTIFY is sent in the inserting transaction on PostgreSQL: nothing to nudge")
    pools.start()
    log = tmp_path / "exec.log"
    db = pools.target.open()
    signal = local_signal(db)
    remote = signal.remote
    try:
        signal.remote = None  # this insert sends no datagram: as if the caller's own transaction
        job = JobBuilder("chaos", {"log": str(log)}).insert(db)
        time.sleep(1.0)
        assert read_executions(log) == {}, "nothing but a wake-up could have started it"
        signal.remote = remote
        started = time.monotonic()
        nudge_workers(db)
        wait_for(lambda: str(job.id) in read_executions(log), START_BOUND_S, "the nudged job")
        assert time.monotonic() - started < START_BOUND_S
    finally:
        signal.remote = remote
        db.dispose()


def test_an_operator_wake_from_the_cli_starts_a_scheduled_job_in_another_process(
    pools: Pools, tmp_path: Path
) -> None:
    pools.start()
    log = tmp_path / "exec.log"
    db = pools.target.open()
    try:
        job = JobBuilder("chaos", {"log": str(log)}).schedule_in(timedelta(hours=1)).insert(db)
    finally:
        db.dispose()
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "kickside_tui.cli", *pools.target.cli_args(), "wake", str(job.id)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    wait_for(lambda: str(job.id) in read_executions(log), START_BOUND_S, "the woken job")
    assert time.monotonic() - started < START_BOUND_S + 5  # the CLI's own start-up included


def test_a_lost_wake_on_sqlite_costs_one_poll_never_the_job(pools: Pools, tmp_path: Path) -> None:
    if pools.target.backend != "sqlite":
        pytest.skip("the wake sockets are SQLite's")
    pools.start(poll_seconds=1.0)
    db = pools.target.open()
    folder = wake_folder_of(db)
    db.dispose()
    assert folder is not None
    sockets = list(folder.glob("*.sock"))
    assert len(sockets) == 1, "the pool bound one wake socket"
    sockets[0].unlink()  # every wake-up to this pool is lost from now on
    log = tmp_path / "exec.log"
    latencies = _latencies(log, _sent(_enqueue(pools.target, log, 5, 50)))
    assert max(latencies) < 1.2 * 1.0 + START_BOUND_S  # the poll found them
