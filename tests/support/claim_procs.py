"""Child-process entry points for the racing-claims test (importable under spawn)."""

from __future__ import annotations

import random
import time
from threading import Barrier

from kickside_engine import (
    JobState,
    claim,
    complete,
    connect_database,
    get_job_statuses,
    record,
)
from kickside_engine.execution import execute
from kickside_engine.workers import WorkerRegistry

registry = WorkerRegistry()


@registry.worker("race")
def race(args: dict[str, object], job: object) -> None:
    time.sleep(0.002)  # a little work, so the racers interleave


def claim_until_empty(url: str, schema: str | None, node: str, batch: int, ready: Barrier) -> int:
    """Claim and complete jobs until the queue is empty; returns how many this process ran.

    Every racer waits at ``ready`` with its database open, so none drains the queue while the
    others are still starting their interpreters.
    """
    db = connect_database(url, schema=schema)
    ready.wait(120)
    ran = 0
    idle_rounds = 0
    try:
        while idle_rounds < 3:
            claimed = claim(db, queue="race", node=node, limit=batch)
            if not claimed:
                idle_rounds += 1
                continue
            idle_rounds = 0
            record(db, [(c, execute(registry, c)) for c in claimed], registry=registry)
            ran += len(claimed)
    finally:
        db.dispose()
    return ran


def claim_rated(
    url: str,
    schema: str | None,
    queue: str,
    job_ids: list[str],
    node: str,
    seed: int,
    ready: Barrier,
) -> int:
    """Claim batches of 1 to 4 jobs of ``queue`` and complete them at once, until every one of
    ``job_ids`` is completed; returns how many this process ran.

    Jobs finish at once so that only the rate limit holds admission back: the racers meet at
    the window's count, not at a concurrency limit. Every racer waits at ``ready`` with its
    database open, so all of them claim from the first window on.
    """
    rng = random.Random(seed)
    db = connect_database(url, schema=schema)
    ready.wait(120)
    deadline = time.monotonic() + 90.0
    ran = 0
    try:
        while time.monotonic() < deadline:
            claimed = claim(db, queue=queue, node=node, limit=rng.randint(1, 4))
            for c in claimed:
                if not complete(db, c):
                    raise RuntimeError(f"lost the lease of {c.job.id}")
            ran += len(claimed)
            if not claimed:
                states = get_job_statuses(db, job_ids)
                if all(s is JobState.COMPLETED for s in states.values()):
                    return ran
                time.sleep(rng.uniform(0.002, 0.01))
    finally:
        db.dispose()
    raise TimeoutError(f"{node}: jobs of {queue} were still waiting at the deadline")
