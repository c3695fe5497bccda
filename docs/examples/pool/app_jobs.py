"""app_jobs.py: the workers an embedded pool's executor processes import."""

from __future__ import annotations

from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


@registry.worker("thumbnail")
def thumbnail(args: dict[str, Any], job: Job) -> None:
    print(f"thumbnail {args['image_id']} on {job.lease_owner}")
