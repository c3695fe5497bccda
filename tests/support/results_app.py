"""Workers that return results, for the results tests; a process pool's executors import it."""

from __future__ import annotations

import time
from typing import Any

from kickside_engine import Done, Job, WorkerRegistry

registry = WorkerRegistry()


@registry.worker("fetch_url", max_attempts=3)
def fetch_url(args: dict[str, Any], job: Job) -> Any:
    time.sleep(float(args.get("sleep_s", 0)))
    return {"url": args["url"], "status": 200, "sizes": (1, 2)}


@registry.worker("done_with_result")
def done_with_result(args: dict[str, Any], job: Job) -> Any:
    return Done(result=[args["n"], "done"])


@registry.worker("huge_result", max_attempts=3)
def huge_result(args: dict[str, Any], job: Job) -> Any:
    return {"blob": "x" * (10 * 1024 * 1024)}


@registry.worker("set_result", max_attempts=3)
def set_result(args: dict[str, Any], job: Job) -> Any:
    return {1, 2, 3}


@registry.worker("secret_result")
def secret_result(args: dict[str, Any], job: Job) -> Any:
    return {"user": "ada", "password": "hunter2"}


@registry.worker("nothing")
def nothing(args: dict[str, Any], job: Job) -> None:
    return None
