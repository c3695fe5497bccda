"""A worker application for pool tests, imported by executor processes.

Workers append a line per execution to the file named by ``KICKSIDE_TEST_LOG`` (or the
``log`` arg): ``job_id pid start end version``, so tests can check from outside that no job
ran twice at the same time.
"""

from __future__ import annotations

import os
import time
from typing import Any

from kickside_engine import CapacityDeclaration, Job, WorkerRegistry

registry = WorkerRegistry()
VERSION = "v1"


def _log(args: dict[str, Any], job: Job, start: float) -> None:
    path = args.get("log") or os.environ.get("KICKSIDE_TEST_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{job.id} {os.getpid()} {start:.6f} {time.time():.6f} {VERSION}\n")


@registry.worker("noop")
def noop(args: dict[str, Any], job: Job) -> None:
    start = time.time()
    _log(args, job, start)


@registry.worker("sleep")
def sleep(args: dict[str, Any], job: Job) -> None:
    start = time.time()
    time.sleep(float(args.get("seconds", 0.1)))
    _log(args, job, start)


@registry.worker("marked_sleep")
def marked_sleep(args: dict[str, Any], job: Job) -> None:
    """Touch the file ``mark`` as it starts, then sleep ``seconds`` and log the execution."""
    start = time.time()
    with open(args["mark"], "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(float(args.get("seconds", 0.1)))
    _log(args, job, start)


@registry.worker("busy_loop")
def busy_loop(args: dict[str, Any], job: Job) -> None:
    while True:  # ignores every polite request to stop
        pass


@registry.worker("exit")
def exit_(args: dict[str, Any], job: Job) -> None:
    os._exit(3)


@registry.worker("fail_once", max_attempts=3)
def fail_once(args: dict[str, Any], job: Job) -> None:
    if job.attempt == 1:
        raise RuntimeError("first attempt fails")
    _log(args, job, time.time())


#: A capacity group for pool tests; its limits live under this settings namespace.
POOL_CAPACITY = CapacityDeclaration(group="pool.capacity", settings_namespace="pool.capacity")


@registry.worker("capped_sleep", capacity=POOL_CAPACITY)
def capped_sleep(args: dict[str, Any], job: Job) -> None:
    start = time.time()
    time.sleep(float(args.get("seconds", 0.05)))
    _log(args, job, start)
