"""Rate limits hold exactly when many processes claim at once, on both backends.

Eight spawned processes race claims of one rate-limited capacity group (batches of 1 to 4,
each job completed at once, so only the rates hold admission back). The run history then
shows every start: bucketed by the fixed one-second windows the claims counted in (a run's
``started_at`` is its claim's time), no window may hold more starts than the group's rate, nor
any key more than the key's rate; and the limits must have been reached, so the race was real.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from kickside_engine import CapacityDeclaration, Database, Job, WorkerSpec
from kickside_engine.store.settings import set_setting

from ..conftest import Target
from ..support import claim_procs, racing

PROCESSES = 8
QUEUE = "rated"
NS = "app.rated"
RATED = CapacityDeclaration(group="rated", settings_namespace=NS)


def _noop(args: dict[str, Any], job: Job) -> None:
    return None


rated = WorkerSpec(name="rated", perform=_noop, queue=QUEUE, capacity=RATED)


procs = racing.spawned_processes(PROCESSES)


def enqueue_jobs(db: Database, count: int, keys: int) -> list[str]:
    return racing.keyed_jobs(db, rated, count, keys)


def race(procs: Any, target: Target, job_ids: list[str]) -> None:
    with multiprocessing.get_context("spawn").Manager() as manager:
        ready = manager.Barrier(PROCESSES)  # every racer's database open before the first claim
        ran = procs.starmap(
            claim_procs.claim_rated, racing.racer_args(target, QUEUE, job_ids, PROCESSES, ready)
        )
    assert sum(ran) == len(job_ids)  # each job ran exactly once
    assert sum(1 for n in ran if n) > 1  # several processes took part


def starts(db: Database, job_ids: list[str]) -> list[tuple[str, datetime]]:
    """``(concurrency_key, started_at)`` of every run of ``job_ids``, as stored."""
    return [(r.concurrency_key, r.started_at) for r in racing.completed_runs(db, job_ids)]


def per_second(runs: list[tuple[str, datetime]]) -> tuple[Counter[Any], Counter[Any]]:
    """Starts per one-second window, and per key and window."""
    window = Counter(at.replace(microsecond=0) for _, at in runs)
    by_key = Counter((key, at.replace(microsecond=0)) for key, at in runs)
    return window, by_key


@pytest.mark.slow
def test_rate_limits_hold_exactly_across_racing_processes(
    db: Database, target: Target, procs: Any
) -> None:
    set_setting(db, NS, "global_limit", 100)
    set_setting(db, NS, "concurrency_key_limit", 100)
    set_setting(db, NS, "rate_limit", "10/s")
    set_setting(db, NS, "rate_limit_per_key", "3/s")  # 5 keys x 3 > 10: the group's rate binds
    first = enqueue_jobs(db, 50, keys=5)
    race(procs, target, first)
    window, by_key = per_second(starts(db, first))
    assert max(window.values()) == 10 and max(by_key.values()) <= 3

    set_setting(db, NS, "rate_limit", "100/s")  # read again by the very next claim
    set_setting(db, NS, "rate_limit_per_key", "2/s")  # 2 keys x 2: the keys' rate binds
    second = enqueue_jobs(db, 16, keys=2)
    race(procs, target, second)
    window, by_key = per_second(starts(db, second))
    assert max(by_key.values()) == 2 and max(window.values()) <= 4
