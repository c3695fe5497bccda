"""A workflow's job is released exactly once when its upstreams settle at the same instant on
different nodes, on both backends.

Each round inserts a workflow of 8 upstream jobs and 8 downstream jobs that each run after all
8 upstreams (every settle decrements every downstream: the worst case for lock order). Eight
spawned processes each claim one upstream and complete it at one shared wall-clock instant,
then read the workflow's states. No child may see a downstream released while an upstream is
open (an early release); after the round every downstream is released (none stuck by two
settles each missing the other's) with its pending count at exactly 0 (a count decremented
twice would break the step's CHECK, failing that settle), and each then runs exactly once.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, JobState, Workflow, get_workflow
from kickside_engine.testing import drain_jobs
from kickside_engine.workers import WorkerRegistry

from ..conftest import Target
from ..support import racing, workflow_procs

PROCESSES = 8
ROUNDS = 6
QUEUE = "race"


procs = racing.spawned_processes(PROCESSES)


def _round(db: Database, n: int) -> tuple[list[str], list[str]]:
    wf = Workflow(f"race-{n}")
    wf.add_many("up", [JobBuilder("up", {"i": i}, queue=QUEUE) for i in range(PROCESSES)])
    wf.add_many(
        "down",
        [JobBuilder("down", {"i": i}, queue="after") for i in range(PROCESSES)],
        after=["up"],
    )
    inserted = wf.insert(db)
    ups = [str(inserted[f"up[{i}]"]) for i in range(PROCESSES)]
    downs = [str(inserted[f"down[{i}]"]) for i in range(PROCESSES)]
    return ups, downs


def test_racing_settles_release_each_downstream_exactly_once(
    procs: Any, db: Database, target: Target
) -> None:
    violations: list[str] = []
    for n in range(ROUNDS):
        ups, downs = _round(db, n)
        at = time.time() + 1.0  # every child has claimed by then
        per_child = procs.starmap(
            workflow_procs.settle_at,
            [
                (target.url, target.schema, QUEUE, f"node{c}", at, [*ups, *downs])
                for c in range(PROCESSES)
            ],
        )
        violations += [v for child in per_child for v in child]
        view = get_workflow(db, f"race-{n}")
        up_steps = [s for s in view.steps if s.group == "up"]
        down_steps = [s for s in view.steps if s.group == "down"]
        assert all(s.state is JobState.COMPLETED for s in up_steps)
        assert [s.state for s in down_steps] == [JobState.AVAILABLE] * PROCESSES
        assert [s.upstreams_pending for s in down_steps] == [0] * PROCESSES
    assert violations == []

    ran: list[int] = []
    registry = WorkerRegistry()

    @registry.worker("down", queue="after")
    def down(args: dict[str, Any], job: Any) -> None:
        ran.append(args["i"])

    drain_jobs(db, registry, queue="after")
    assert sorted(ran) == sorted(list(range(PROCESSES)) * ROUNDS)
    with db.read() as conn:
        run = db.tables.job_run
        per_job = conn.execute(
            sa.select(run.c.job_id, sa.func.count())
            .where(run.c.queue == "after")
            .group_by(run.c.job_id)
        ).all()
    assert len(per_job) == PROCESSES * ROUNDS and {count for _, count in per_job} == {1}
