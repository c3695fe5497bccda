"""Typed args and class workers: args_type decodes the stored args before perform sees them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from kickside_engine import Job, JobState, WorkerRegistry, connect_database, get_job, migrate
from kickside_engine.testing import drain_jobs

registry = WorkerRegistry()


@dataclass(frozen=True)
class ResizeArgs:
    image_id: int
    width: int = 800


@registry.worker("resize_image", args_type=ResizeArgs)
def resize_image(args: ResizeArgs, job: Job) -> None:
    print(f"resizing image {args.image_id} to {args.width} px")


@registry.worker("export_report")
class ExportReport:
    """A class worker: a fresh instance runs each job; class attributes set the defaults."""

    queue = "reports"
    max_attempts = 3
    timeout = timedelta(minutes=30)

    def perform(self, args: dict[str, str], job: Job) -> None:
        print(f"exporting {args['report']} on queue {job.queue}")


db = connect_database()
migrate.upgrade(db)
good = resize_image.new(ResizeArgs(image_id=1, width=300)).insert(db).id  # or a dict
bad = resize_image.new({"image": 1}).insert(db).id  # no image_id: does not decode
report = registry.get("export_report")
assert report is not None and report.queue == "reports"
report.new({"report": "q3"}).insert(db)

drain_jobs(db, registry)
bad_job = get_job(db, bad)
assert bad_job is not None and bad_job.state is JobState.DISCARDED  # retrying cannot help
print(bad_job.errors[-1].error)
good_job = get_job(db, good)
assert good_job is not None and good_job.state is JobState.COMPLETED
