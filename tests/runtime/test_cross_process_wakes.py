"""A pool in another process starts a job at once: NOTIFY on PostgreSQL, datagrams on SQLite.

The pools here poll every 30 s, so a job that starts within seconds of its enqueue was started
by a wake-up, not by the poll. The bound the tests check is generous (the documented figures
are milliseconds: docs/operating/sqlite.md); a lost wake-up costs one poll interval, never a job.

The controls take the same way: an operator's cancel from another process stops the execution
at once (its pool here checks its leases only every 10 minutes, so only the message can explain
a stop within seconds), ``kickside reload`` upgrades a pool that SIGHUP would end, and a
:func:`listen` subscription hears other processes' enqueues and actions.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from kickside_engine import JobBuilder, JobState, get_job, listen, migrate
from kickside_engine.slots import nudge_workers
from kickside_engine.store.notify import local_signal, wake_folder_of

from ..conftest import Target
from ..support.execlog import read_executions
from ..support.processes import ROOT, wait_for
from ..support.procfs import alive

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

    def start(self, poll_seconds: float = SLOW_POLL_S, *options: str) -> subprocess.Popen[str]:
        proc = _spawn(self.target, "pool", "--poll", str(poll_seconds), *options)
        self.procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", "the pool process did not start"
        return proc

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


# --- controls: cancel, reload, listen ----------------------------------------------------------

#: The pool's lease and lease check: neither its renewal (every 200 s) nor its check of the
#: leases it holds could notice a cancel within the bound below.
LONG_LEASE_S = 600.0
LONG_CHECK_S = 600.0
#: Generous: the message arrives in milliseconds.
CONTROL_BOUND_S = 10.0


def _cli(target: Target, *argv: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "kickside_tui.cli", *target.cli_args(), *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("action", ["cancel", "discard"])
def test_a_cancel_from_another_process_stops_the_running_job_at_once(
    pools: Pools, tmp_path: Path, action: str
) -> None:
    pools.start(SLOW_POLL_S, "--lease", str(LONG_LEASE_S), "--lease-check", str(LONG_CHECK_S))
    log = tmp_path / "exec.log"
    db = pools.target.open()
    try:
        job = JobBuilder("chaos", {"log": str(log), "ms": 600_000}).insert(db)
        started = wait_for(
            lambda: read_executions(log).get(str(job.id)), START_BOUND_S, "the job to start"
        )[0]
        assert alive(started.pid)
        before = time.monotonic()
        _cli(pools.target, action, str(job.id), "--yes")
        wait_for(lambda: not alive(started.pid), CONTROL_BOUND_S, "the execution to stop")
        stopped_after = time.monotonic() - before
        assert stopped_after < CONTROL_BOUND_S  # the CLI's own start-up included
        final = get_job(db, job.id)
        assert final is not None
        assert final.state is (JobState.CANCELLED if action == "cancel" else JobState.DISCARDED)
        assert read_executions(log)[str(job.id)][0].end_ns is None, "the body never finished"
    finally:
        db.dispose()


def _executor_pids(log: Path, db_target: Target, count: int) -> set[int]:
    """Run ``count`` short jobs; the executor processes that ran them."""
    db = db_target.open()
    try:
        jobs = [JobBuilder("chaos", {"log": str(log)}).insert(db) for _ in range(count)]
    finally:
        db.dispose()
    ids = {str(job.id) for job in jobs}
    found = wait_for(
        lambda: (runs := read_executions(log)) and ids <= runs.keys() and runs, 60, "the jobs"
    )
    return {found[i][0].pid for i in ids}


def test_reload_from_another_process_upgrades_a_pool_that_sighup_would_end(
    pools: Pools, tmp_path: Path
) -> None:
    proc = pools.start()
    log = tmp_path / "exec.log"
    old = _executor_pids(log, pools.target, 4)
    result = _cli(pools.target, "reload", "--json")
    assert json.loads(result.stdout) == {"signalled": 1}
    # New executors take the next jobs; the old ones, idle, were retired.
    new = wait_for(
        lambda: (pids := _executor_pids(log, pools.target, 2)) and not pids & old and pids,
        60,
        "jobs on the new executors",
    )
    assert all(not alive(pid) for pid in old)
    assert new and proc.poll() is None, "the pool process carries on"


def test_listen_hears_another_processs_enqueue_and_cancel_and_closes_its_socket(
    pools: Pools, tmp_path: Path
) -> None:
    target = pools.target
    db = target.open()
    heard: list[str] = []
    arrived = threading.Event()

    def on_payload(payload: str) -> None:
        heard.append(payload)
        arrived.set()

    subscription = listen(db, on_payload)
    try:
        assert subscription.connected.wait(10)
        folder = wake_folder_of(db)
        if target.backend == "sqlite":
            assert folder is not None
            assert [p.name for p in folder.glob("*.sock")] == [
                subscription.wake_socket.path.name  # type: ignore[union-attr]
            ]
        log = tmp_path / "exec.log"
        sent = _sent(_enqueue(target, log, 1, 10))  # another process; no pool runs
        (job_id,) = sent
        wait_for(lambda: "default" in heard, CONTROL_BOUND_S, "the enqueue's payload")
        _cli(target, "cancel", job_id, "--yes")
        wait_for(lambda: "audit:cancel" in heard, CONTROL_BOUND_S, "the cancel's payload")
    finally:
        subscription.stop()
        db.dispose()
    if target.backend == "sqlite":
        assert folder is not None
        assert not folder.exists() or list(folder.glob("*.sock")) == []
    count = len(heard)
    _sent(_enqueue(target, tmp_path / "after.log", 1, 10))
    time.sleep(0.5)
    assert len(heard) == count, "nothing is delivered after stop"
