"""Child-process entry points for the racing-claims test (importable under spawn)."""

from __future__ import annotations

import time

from kickside_engine import claim, connect_database, record
from kickside_engine.execution import execute
from kickside_engine.workers import WorkerRegistry

registry = WorkerRegistry()


@registry.worker("race")
def race(args: dict[str, object], job: object) -> None:
    time.sleep(0.002)  # a little work, so the racers interleave


def claim_until_empty(url: str, schema: str | None, node: str, batch: int, start_at: float) -> int:
    """Claim and complete jobs until the queue is empty; returns how many this process ran.

    Every racer waits for ``start_at`` (wall clock), so none drains the queue while the
    others are still starting their interpreters.
    """
    db = connect_database(url, schema=schema)
    time.sleep(max(0.0, start_at - time.time()))
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
