"""Child-process entry points for the racing-claims test (importable under spawn)."""

from __future__ import annotations

from kickside_engine import claim, connect_database, record
from kickside_engine.execution import execute
from kickside_engine.workers import WorkerRegistry

registry = WorkerRegistry()


@registry.worker("race")
def race(args: dict[str, object], job: object) -> None:
    return None


def claim_until_empty(url: str, schema: str | None, node: str, batch: int) -> int:
    """Claim and complete jobs until the queue is empty; returns how many this process ran."""
    db = connect_database(url, schema=schema)
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
