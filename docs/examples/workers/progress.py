"""A running job reports its progress; a reader sees it change while the job runs."""

from __future__ import annotations

import time
from typing import Any

from kickside_engine import Job, JobState, WorkerRegistry, connect_database, get_job, migrate
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.testing import perform_job

registry = WorkerRegistry()


@registry.worker("import_rows")
def import_rows(args: dict[str, Any], job: Job) -> dict[str, int]:
    batches = args["batches"]
    for n in range(1, batches + 1):
        time.sleep(0.4)  # a batch of real work
        # As often as you like: at most one write a second, the last with the outcome.
        job.report_progress({"fraction": n / batches, "rows": n * 100})
    return {"rows": batches * 100}


# In tests, perform_job runs the worker and collects every report.
seen: list[Any] = []
perform_job(import_rows, {"batches": 2}, progress=seen)
assert seen == [{"fraction": 0.5, "rows": 100}, {"fraction": 1.0, "rows": 200}]

db = connect_database()
migrate.upgrade(db)
job_id = import_rows.new({"batches": 5}).insert(db).id
pool = WorkerPool(db, PoolConfig(queues={"default": 1}, mode="thread", registry=registry))
pool.start()
try:
    observed = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = get_job(db, job_id)
        assert job is not None
        if job.state is JobState.EXECUTING and job.progress not in (None, *observed):
            observed.append(job.progress)  # what the dashboard and `kickside job` show
        if job.state is JobState.COMPLETED:
            break
        time.sleep(0.05)
finally:
    pool.stop()
done = get_job(db, job_id)
assert done is not None and done.state is JobState.COMPLETED
assert observed, "the reader saw the job's progress while it ran"
assert done.progress == {"fraction": 1.0, "rows": 500}  # the last report stays on the job
print("seen while running:", observed)
