"""A batch with a final callback: 10 jobs, then one job once every one of them is final, which
reads how each ended. A failed item does not stop the callback (``batch`` runs it anyway)."""

from __future__ import annotations

from typing import Any

from kickside_engine import (
    Discard,
    Job,
    JobState,
    WorkerRegistry,
    batch,
    connect_database,
    get_job,
    migrate,
    upstream_results,
)
from kickside_engine.testing import drain_jobs

registry = WorkerRegistry()
db = connect_database()
migrate.upgrade(db)


@registry.worker("resize", max_attempts=1)
def resize(args: dict[str, Any], job: Job) -> Any:
    if args["n"] == 7:
        return Discard("image 7 is corrupt")
    return {"n": args["n"], "ok": True}


@registry.worker("report")
def report(args: dict[str, Any], job: Job) -> dict[str, int]:
    items = upstream_results(db, job).values()
    return {
        "resized": sum(i.state is JobState.COMPLETED for i in items),
        "failed": sum(i.state is JobState.DISCARDED for i in items),
    }


ids = batch(
    "resize-batch-1", "item", [resize.new({"n": n}) for n in range(10)], then=report.new({})
).insert(db)
drain_jobs(db, registry)
done = get_job(db, ids["then"])
assert done is not None
print(done.result)  # {'resized': 9, 'failed': 1}
assert done.result == {"resized": 9, "failed": 1}
