"""Crash chaos: four pools work through a backlog while one of them is killed -9 again and again.

Every job must complete, none may run on two executors at once (checked twice: from the
executors' own records and from the run history's ``started_at``/``finished_at``), every
execution beyond one per job must be an attempt that a kill interrupted, and the consistency
checks find nothing at the end. The size scales by environment; the full size is::

    KICKSIDE_CHAOS_JOBS=10000 KICKSIDE_CHAOS_KILLS=8 \
        .venv/bin/pytest tests/reliability/test_crash_chaos.py

(the CI default is 1,500 jobs and 3 kills); ``KICKSIDE_CHAOS_SEED`` replays a run's random
choices (the seed is printed, and named in every failure).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from kickside_engine import Database, JobBuilder, enqueue_many
from kickside_engine.control.consistency import find_inconsistencies

from ..conftest import Target
from ..support.execlog import Execution, overlapping, read_executions
from ..support.history import (
    INTERRUPTED,
    history_problems,
    load_history,
    overlapping_runs,
    state_counts,
)
from ..support.processes import start_worker, stop, wait_for
from ..support.procfs import alive, process_tree

pytestmark = pytest.mark.slow

JOBS = int(os.environ.get("KICKSIDE_CHAOS_JOBS", "1500"))
KILLS = int(os.environ.get("KICKSIDE_CHAOS_KILLS", "3"))
SEED = int(os.environ.get("KICKSIDE_CHAOS_SEED") or random.SystemRandom().randrange(1 << 32))
LEASE_SECONDS = 3
EXECUTORS = 3
#: Jobs kept waiting before each kill (about three seconds of the four pools' work).
TOP_UP = 300


class Pools:
    """The four pools: three steady ones and a victim that is killed and restarted."""

    def __init__(self, target: Target, out: Path) -> None:
        self.target = target
        self.out = out
        self.steady = [self._start(f"steady-{i}") for i in range(3)]
        self.generation = 0
        self.victim = self._start("victim-0")
        self.killed: dict[int, int] = {}  # supervisor pid -> monotonic ns once all were dead
        self.killed_nodes: set[str] = set()

    def _start(self, node: str) -> subprocess.Popen[bytes]:
        # The victim's executors take their jobs four at a time: a kill lands mid-batch, with
        # jobs handed over that have not started.
        batches = ["--handoff-batch", "4"] if node.startswith("victim") else []
        return start_worker(
            self.target.cli_args(),
            app="tests.support.chaos_app",
            queues=f"default:{EXECUTORS}",
            extra=["--lease-seconds", str(LEASE_SECONDS), "--node", node, *batches],
            log=self.out / f"{node}.out",
        )

    def kill_victim(self, whole_group: bool) -> None:
        """SIGKILL the victim: its process group (a power loss) or only its supervisor."""
        proc = self.victim
        tree = process_tree(proc.pid)
        if whole_group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            os.kill(proc.pid, signal.SIGKILL)  # executors follow by PR_SET_PDEATHSIG
        proc.wait(10)
        wait_for(lambda: not any(alive(pid) for pid in tree), 10, "the victim's executors")
        self.killed[proc.pid] = time.monotonic_ns()
        self.killed_nodes.add(f"victim-{self.generation}")
        self.generation += 1
        self.victim = self._start(f"victim-{self.generation}")

    def stop_all(self) -> list[int]:
        return [stop(p) for p in [*self.steady, self.victim]]


class Backlog:
    """The chaos jobs: :data:`JOBS` at the start, then more whenever few are left waiting
    before a kill (``enqueued`` counts them all)."""

    def __init__(self, db: Database, log: Path, rng: random.Random) -> None:
        self.db, self.log, self.rng = db, log, rng
        self.enqueued = 0

    def add(self, n: int) -> None:
        jobs = [
            JobBuilder("chaos", {"log": str(self.log), "ms": self.rng.randint(20, 150)})
            for _ in range(n)
        ]
        enqueue_many(self.db, jobs)
        self.enqueued += n

    def top_up(self) -> bool:
        """Add :data:`TOP_UP` jobs when fewer than that are waiting; always True."""
        if state_counts(self.db).get("available", 0) < TOP_UP:
            self.add(TOP_UP)
        return True


def _started_by(log: Path, ppid: int) -> bool:
    if not log.exists():
        return False
    return any(line.split()[2] == str(ppid) for line in log.read_text().splitlines())


def test_kill_9_chaos_loses_nothing_and_never_runs_a_job_twice_at_once(
    pg_target: Target, pg_db: Database, tmp_path: Path
) -> None:
    print(f"chaos seed={SEED} jobs={JOBS} kills={KILLS}")
    rng = random.Random(SEED)
    tag = f"[seed {SEED}]"
    log = tmp_path / "executions.log"
    backlog = Backlog(pg_db, log, rng)
    backlog.add(JOBS)
    pools = Pools(pg_target, tmp_path)
    try:
        for _ in range(KILLS):
            # A random moment while the victim is at work (a restart takes seconds here). The
            # backlog is topped up first, so on a slow machine the steady pools cannot finish
            # the work before the kills land.
            victim = pools.victim
            wait_for(
                lambda v=victim: backlog.top_up() and _started_by(log, v.pid),  # type: ignore[misc]
                60,
                f"the victim running jobs {tag}",
            )
            time.sleep(rng.uniform(0.05, 1.5))
            pools.kill_victim(whole_group=rng.random() < 0.5)
        total = backlog.enqueued
        assert state_counts(pg_db).get("completed", 0) < total, f"kills came too late {tag}"
        wait_for(
            lambda: state_counts(pg_db) == {"completed": total},
            180,
            f"every job completed {tag}",
        )
    finally:
        codes = pools.stop_all()
    assert codes == [0, 0, 0, 0], tag

    jobs = load_history(pg_db)
    assert len(jobs) == total, tag
    assert history_problems(jobs) == [], tag
    assert overlapping_runs(jobs) == [], tag
    executions = read_executions(log)
    assert overlapping(executions, pools.killed) == [], tag
    killed_pids = set(pools.killed)
    extra: list[Execution] = []
    for job_id, runs in executions.items():
        job = jobs[job_id]
        finished = [e for e in runs if e.attempt == job.attempt]
        assert len(finished) == 1 and finished[0].end_ns is not None, f"{job_id} {tag}"
        assert all(e.attempt <= job.attempt for e in runs), f"{job_id} {tag}"
        for e in runs:
            if e.attempt == job.attempt:
                continue
            extra.append(e)
            run = job.runs[e.attempt - 1]
            assert e.ppid in killed_pids, f"{job_id} attempt {e.attempt} re-run, no kill {tag}"
            assert run.outcome in INTERRUPTED and run.node in pools.killed_nodes, f"{run} {tag}"
    assert set(executions) == set(jobs), f"a job completed without running {tag}"
    # Interrupted runs belong to killed nodes only, and there were some: the kills hit work.
    interrupted = [r for j in jobs.values() for r in j.runs if r.outcome in INTERRUPTED]
    assert interrupted and all(r.node in pools.killed_nodes for r in interrupted), tag
    assert find_inconsistencies(pg_db) == [], tag
    print(
        f"chaos: {total} jobs, {KILLS} kills, {len(interrupted)} interrupted runs, "
        f"{len(extra)} extra executions"
    )
