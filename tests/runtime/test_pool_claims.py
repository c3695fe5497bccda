"""What real pools claim: one order for keyed and keyless jobs, limits the run history can
audit, and only jobs of workers the pool has (the rest wait for a pool that has them)."""

from __future__ import annotations

import textwrap
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, JobState, enqueue_many, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import list_nodes, list_runs
from kickside_engine.control.explain import explain
from kickside_engine.control.health import doctor
from kickside_engine.store.settings import set_setting
from kickside_engine.workers import spec_of

from ..conftest import Target
from ..engine.test_capacity_race import most_at_once
from ..support.pool_app import capped_sleep
from ..support.processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow


def _state_count(db: Database, state: JobState) -> int:
    job = db.tables.job
    with db.read() as conn:
        return int(
            conn.execute(
                sa.select(sa.func.count()).select_from(job).where(job.c.state == state.value)
            ).scalar_one()
        )


def _runs_by_start(db: Database) -> list[tuple[str | None, int, object, object]]:
    """``(concurrency_key, priority, started_at, finished_at)`` of every run, by start."""
    job, run = db.tables.job, db.tables.job_run
    with db.read() as conn:
        rows = conn.execute(
            sa.select(job.c.concurrency_key, job.c.priority, run.c.started_at, run.c.finished_at)
            .join(run, run.c.job_id == job.c.id)
            .order_by(run.c.started_at, run.c.id)
        ).all()
    return [tuple(r) for r in rows]  # type: ignore[misc]


def test_keyed_jobs_keep_their_priority_under_a_keyless_backlog(
    db: Database, target: Target, tmp_path: Path
) -> None:
    backlog = [JobBuilder("sleep", {"seconds": 0.05}).priority(5) for _ in range(60)]
    urgent = [
        JobBuilder("sleep", {"seconds": 0.05}).priority(0).concurrency_key(f"acct-{i}")
        for i in range(4)
    ]
    enqueue_many(db, backlog + urgent)
    proc = start_worker(target.cli_args(), queues="default:2", log=tmp_path / "pool.out")
    try:
        wait_for(lambda: _state_count(db, JobState.COMPLETED) == 64, 90, "64 completed jobs")
    finally:
        assert stop(proc) == 0
    starts = _runs_by_start(db)
    keyed_ranks = [i for i, (key, *_rest) in enumerate(starts) if key is not None]
    # In the first claims, not after the 60 keyless jobs that were queued before them.
    assert len(keyed_ranks) == 4 and max(keyed_ranks) < 12, keyed_ranks


def test_pools_keep_capacity_limits_and_their_history_shows_it(
    db: Database, target: Target, tmp_path: Path
) -> None:
    set_setting(db, "pool.capacity", "global_limit", 2)
    set_setting(db, "pool.capacity", "concurrency_key_limit", 1)
    enqueue_many(
        db,
        [
            JobBuilder.for_worker(spec_of(capped_sleep), {"seconds": 0.03}).concurrency_key(
                f"k{i % 3}"
            )
            for i in range(36)
        ],
    )
    pools = [
        start_worker(target.cli_args(), queues="default:3", log=tmp_path / f"pool{n}.out")
        for n in range(2)
    ]
    try:
        wait_for(lambda: _state_count(db, JobState.COMPLETED) == 36, 120, "36 completed jobs")
    finally:
        assert [stop(p) for p in pools] == [0, 0]
    runs = _runs_by_start(db)
    assert len(runs) == 36
    assert most_at_once([(s, e) for _k, _p, s, e in runs]) <= 2
    for key in ("k0", "k1", "k2"):
        assert most_at_once([(s, e) for k, _p, s, e in runs if k == key]) == 1


def test_pools_keep_rate_limits_and_held_jobs_are_not_charged_an_attempt(
    db: Database, target: Target, tmp_path: Path
) -> None:
    set_setting(db, "pool.capacity", "global_limit", 10)
    set_setting(db, "pool.capacity", "concurrency_key_limit", 10)
    set_setting(db, "pool.capacity", "rate_limit", "4/s")
    set_setting(db, "pool.capacity", "rate_limit_per_key", "2/s")
    ids = [
        j.id
        for j in enqueue_many(
            db,
            [
                JobBuilder.for_worker(spec_of(capped_sleep), {"seconds": 0.01}).concurrency_key(
                    f"k{i % 3}"
                )
                for i in range(18)
            ],
        )
    ]
    pools = [
        start_worker(target.cli_args(), queues="default:5", log=tmp_path / f"pool{n}.out")
        for n in range(2)
    ]
    try:
        wait_for(lambda: _state_count(db, JobState.COMPLETED) == 18, 120, "18 completed jobs")
    finally:
        assert [stop(p) for p in pools] == [0, 0]
    runs = _runs_by_start(db)
    assert len(runs) == 18  # one run each: holding a job back never ran, failed or retried it
    per_window = Counter(s.replace(microsecond=0) for _k, _p, s, _e in runs)
    per_key = Counter((k, s.replace(microsecond=0)) for k, _p, s, _e in runs)
    assert max(per_window.values()) <= 4 and max(per_key.values()) <= 2
    assert {get_job(db, i).attempt for i in ids} == {1}  # type: ignore[union-attr]


FUTURE_APP = """
from kickside_engine import WorkerRegistry

registry = WorkerRegistry()
KICKSIDE_CODE_VERSION = "v2"


@registry.worker("from_the_future")
def from_the_future(args, job):
    return None
"""


def test_a_pool_leaves_jobs_of_workers_it_does_not_have(
    db: Database, target: Target, tmp_path: Path
) -> None:
    # A rolling deploy: the new job type is enqueued while only old pools run.
    (future,) = enqueue_many(db, [JobBuilder("from_the_future", {"n": 1})])
    enqueue_many(db, [JobBuilder("noop", {}) for _ in range(5)])
    old = start_worker(target.cli_args(), queues="default:2", log=tmp_path / "old.out")
    try:
        wait_for(lambda: _state_count(db, JobState.COMPLETED) == 5, 60, "the old pool's jobs")
        wait_for(lambda: any(n.workers for n in list_nodes(db, utcnow())), 15, "published workers")
        (node,) = list_nodes(db, utcnow())
        assert node.workers is not None and "noop" in node.workers
        assert "from_the_future" not in node.workers
        waiting = get_job(db, future.id)
        assert waiting is not None and waiting.state is JobState.AVAILABLE
        assert waiting.attempt == 0 and waiting.errors == [] and list_runs(db, future.id) == []
        reasons = {r.code: r.message for r in explain(db, future.id, now=utcnow()).reasons}
        assert "no running node has worker 'from_the_future'" in reasons["unknown_worker"]
        finding = {f.check: f for f in doctor(db, utcnow()).findings}["workers"]
        assert finding.status == "warn" and "from_the_future" in finding.message

        (tmp_path / "future_app.py").write_text(textwrap.dedent(FUTURE_APP))
        new = start_worker(
            target.cli_args(),
            app="future_app",
            queues="default:1",
            pythonpath=[str(tmp_path)],
            log=tmp_path / "new.out",
        )
        try:
            wait_for(
                lambda: (
                    (job := get_job(db, future.id)) is not None and job.state is JobState.COMPLETED
                ),
                60,
                "the new pool to run the new job type",
            )
        finally:
            assert stop(new) == 0
    finally:
        assert stop(old) == 0
    (run,) = list_runs(db, future.id)
    assert run.attempt == 1
