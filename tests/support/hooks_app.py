"""A worker application with middleware and lifecycle hooks, imported by executor processes.

Every middleware step, worker call and hook appends ``tag job_id`` to the file named by
``KST_HOOKS_LOG`` (executors inherit the environment), so tests see from outside what ran, in
which order. A failing hook is registered first for ``on_start`` and ``on_stop``: the hooks
after it still run, the jobs still finish, and the failure is logged (redacted).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import Any

from kickside_engine import Job, WorkerRegistry
from kickside_engine.hooks import Discarded, Enqueued, Rescued, Stopped

registry = WorkerRegistry()


def note(tag: str, job_id: object) -> None:
    path = os.environ.get("KST_HOOKS_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(f"{tag} {job_id}\n")


def read_log(path: str) -> list[tuple[str, str]]:
    """The ``(tag, job_id)`` lines written so far."""
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [tuple(line.split()) for line in fh.read().splitlines()]  # type: ignore[misc]


# -- middleware: sync for sync workers, async for async workers ---------------------------------


@registry.middleware
def outer(call_next: Callable[[Any, Job], Any], args: Any, job: Job) -> Any:
    note("outer-in", job.id)
    value = call_next({**args, "tenant": job.meta.get("tenant", "none")}, job)
    note("outer-out", job.id)
    if args.get("replace") is not None:
        return {"replaced": args["replace"]}
    return value


@registry.middleware
def inner(call_next: Callable[[Any, Job], Any], args: Any, job: Job) -> Any:
    note("inner-in", job.id)
    if args.get("refuse"):
        raise RuntimeError("middleware refused: password=hunter2")
    value = call_next(args, job)
    note("inner-out", job.id)
    return value


@registry.middleware
async def async_outer(call_next: Callable[[Any, Job], Awaitable[Any]], args: Any, job: Job) -> Any:
    note("aouter-in", job.id)
    value = await call_next({**args, "tenant": job.meta.get("tenant", "none")}, job)
    note("aouter-out", job.id)
    if args.get("replace") is not None:
        return {"replaced": args["replace"]}
    return value


@registry.middleware
async def async_inner(call_next: Callable[[Any, Job], Awaitable[Any]], args: Any, job: Job) -> Any:
    note("ainner-in", job.id)
    if args.get("refuse"):
        raise RuntimeError("middleware refused: password=hunter2")
    value = await call_next(args, job)
    note("ainner-out", job.id)
    return value


# -- workers -----------------------------------------------------------------------------------


@registry.worker("echo", max_attempts=2)
def echo(args: dict[str, Any], job: Job) -> dict[str, Any]:
    note("worker", job.id)
    return {"tenant": args.get("tenant")}


@registry.worker("async_echo", max_attempts=2)
async def async_echo(args: dict[str, Any], job: Job) -> dict[str, Any]:
    await asyncio.sleep(0)
    note("aworker", job.id)
    return {"tenant": args.get("tenant")}


# -- hooks -------------------------------------------------------------------------------------


@registry.on_start
def broken_start(job: Job) -> None:
    raise ValueError("start hook broke: password=hunter2")


@registry.on_start
def started(job: Job) -> None:
    note("start", job.id)


@registry.on_stop
def broken_stop(stopped: Stopped) -> None:
    raise ValueError("stop hook broke")


@registry.on_stop
def stopped(stopped: Stopped) -> None:
    note(f"stop:{stopped.outcome}", stopped.job.id)


@registry.on_discard
def discarded(event: Discarded) -> None:
    note("discard", event.job_id)


@registry.on_rescue
def rescued(event: Rescued) -> None:
    note("rescue" + (":discarded" if event.discarded else ""), event.job_id)


@registry.on_enqueue
def enqueued(event: Enqueued) -> None:
    note("enqueue" + (":duplicate" if event.duplicate else ""), event.id)
