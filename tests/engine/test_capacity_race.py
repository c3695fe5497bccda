"""Capacity limits hold when many processes claim at once, and the run history proves it.

Eight spawned processes claim, hold and complete jobs of one capacity group (global limit 3,
one per key, 60 jobs over 5 keys), on both backends. Executions are then rebuilt from the run
history as stored (``started_at`` to ``finished_at``) and must never overlap more than the limits
allow: the history is how operators audit limits, so every stored time is taken inside the
transaction that makes the change, once its locks are held. A lowered limit holds on the next
round of claims and an invalid one admits nothing.

Each child also notes when its claim had returned; the stored start may never be later.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest

from kickside_engine import (
    CapacityDeclaration,
    Database,
    Job,
    JobState,
    WorkerSpec,
    claim,
    get_job_statuses,
)
from kickside_engine.store.settings import set_setting

from ..conftest import Target
from ..support import racing, slot_procs

PROCESSES = 8
QUEUE = "capacity"
CAPACITY = CapacityDeclaration(group="app.capacity", settings_namespace="app.capacity")


def _noop(args: dict[str, Any], job: Job) -> None:
    return None


capped = WorkerSpec(name="capped", perform=_noop, queue=QUEUE, capacity=CAPACITY)


procs = racing.spawned_processes(PROCESSES)


def enqueue_jobs(db: Database, count: int) -> list[str]:
    return racing.keyed_jobs(db, capped, count, keys=5)


def run_all(procs: Any, target: Target, job_ids: list[str]) -> dict[str, datetime]:
    """Let every process claim until the jobs are done; when each job's claim committed."""
    per_child = procs.starmap(
        slot_procs.run_capacity_jobs, racing.racer_args(target, QUEUE, job_ids, PROCESSES)
    )
    admitted = {job_id: at for child in per_child for job_id, at in child}
    assert sorted(admitted) == sorted(job_ids)  # each job ran exactly once
    return admitted


def executions(db: Database, admitted: dict[str, datetime]) -> list[tuple[str, datetime, datetime]]:
    """``(concurrency_key, started_at, finished_at)`` per job, from the run history as stored."""
    out = []
    for r in racing.completed_runs(db, list(admitted)):
        assert r.started_at <= admitted[str(r.id)] <= r.finished_at
        out.append((r.concurrency_key, r.started_at, r.finished_at))
    return out


def most_at_once(intervals: Sequence[tuple[Any, Any]]) -> int:
    """The largest number of intervals covering one instant (an end before a start at ties);
    their ends are any ordered instants (datetimes, seconds)."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    busy = peak = 0
    for _, delta in events:
        busy += delta
        peak = max(peak, busy)
    return peak


def assert_within(runs: list[tuple[str, datetime, datetime]], global_limit: int) -> None:
    assert most_at_once([(s, e) for _, s, e in runs]) <= global_limit
    by_key: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    for key, s, e in runs:
        by_key[key].append((s, e))
    assert all(most_at_once(spans) <= 1 for spans in by_key.values())


@pytest.mark.slow
def test_capacity_limits_hold_across_processes(db: Database, target: Target, procs: Any) -> None:
    set_setting(db, "app.capacity", "global_limit", 3)
    set_setting(db, "app.capacity", "concurrency_key_limit", 1)
    first = enqueue_jobs(db, 60)
    assert_within(executions(db, run_all(procs, target, first)), global_limit=3)

    set_setting(db, "app.capacity", "global_limit", 1)  # read again by the very next claim
    second = enqueue_jobs(db, 12)
    assert_within(executions(db, run_all(procs, target, second)), global_limit=1)

    set_setting(db, "app.capacity", "global_limit", "three")
    third = enqueue_jobs(db, 3)
    assert claim(db, queue=QUEUE, node="parent", limit=10) == []
    assert set(get_job_statuses(db, third).values()) == {JobState.AVAILABLE}
