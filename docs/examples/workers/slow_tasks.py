"""slow_tasks.py: a worker with a timeout (its max execution), for timeouts.py."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from kickside_engine import Job, WorkerRegistry

registry = WorkerRegistry()


@registry.worker("render_video", timeout=timedelta(seconds=1), max_attempts=3)
def render_video(args: dict[str, Any], job: Job) -> None:
    time.sleep(args["seconds"])  # a hung call, say
