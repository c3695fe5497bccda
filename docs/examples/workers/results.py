"""A worker's return value is its result: stored on the job, read back with wait_for."""

from __future__ import annotations

from typing import Any

from kickside_engine import (
    Done,
    Job,
    JobState,
    WaitTimeoutError,
    WorkerRegistry,
    connect_database,
    get_job,
    migrate,
    wait_for,
)
from kickside_engine.testing import drain_jobs

registry = WorkerRegistry()


@registry.worker("measure_page")
def measure_page(args: dict[str, Any], job: Job) -> dict[str, Any]:
    return {"url": args["url"], "bytes": 5120}  # any JSON value is the job's result


@registry.worker("resize_image")
def resize_image(args: dict[str, Any], job: Job) -> Done:
    return Done(result={"path": f"/thumbs/{args['image_id']}.webp"})  # the same, with Done


@registry.worker("export_rows")
def export_rows(args: dict[str, Any], job: Job) -> set[int]:
    return {1, 2, 3}  # a set is not JSON: the attempt fails, naming the type


db = connect_database()
migrate.upgrade(db)
page = measure_page.new({"url": "https://example.com"}).insert(db).id
thumb = resize_image.new({"image_id": 7}).insert(db).id
export = export_rows.new({}).insert(db).id

try:
    wait_for(db, page, timeout=0.05)  # nothing runs the job yet
except WaitTimeoutError as exc:
    print("still waiting:", exc)

drain_jobs(db, registry)  # a pool would run them; here, in this thread

done = wait_for(db, page, timeout=10)  # returns once the job is final
assert done.state is JobState.COMPLETED
assert done.result == {"url": "https://example.com", "bytes": 5120}
assert wait_for(db, thumb, timeout=10).result == {"path": "/thumbs/7.webp"}

refused = get_job(db, export)
assert refused is not None and refused.state is JobState.RETRYABLE
assert refused.errors[-1].error.startswith("result of type set cannot be stored as JSON")
print(done.result, refused.errors[-1].error.splitlines()[0])
