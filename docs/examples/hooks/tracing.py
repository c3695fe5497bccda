"""An application's middleware and hooks: a tenant context around every execution (sync and
async workers), and counters fed by the lifecycle hooks. Executors import this module."""

from __future__ import annotations

import contextvars
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from kickside_engine import Job, WorkerRegistry
from kickside_engine.hooks import Discarded, Enqueued, Stopped

registry = WorkerRegistry()
tenant: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="none")
counts: Counter[str] = Counter()


@registry.middleware  # first registered: outermost
def with_tenant(call_next: Callable[[Any, Job], Any], args: Any, job: Job) -> Any:
    token = tenant.set(job.meta.get("tenant", "none"))
    try:
        return call_next(args, job)
    finally:
        tenant.reset(token)


@registry.middleware  # the same for async workers: an async def middleware
async def with_tenant_async(
    call_next: Callable[[Any, Job], Awaitable[Any]], args: Any, job: Job
) -> Any:
    token = tenant.set(job.meta.get("tenant", "none"))
    try:
        return await call_next(args, job)
    finally:
        tenant.reset(token)


@registry.middleware
def refuse_suspended(call_next: Callable[[Any, Job], Any], args: Any, job: Job) -> Any:
    if tenant.get() == "suspended":
        raise PermissionError("tenant suspended")  # fails the attempt, as the worker raising
    return call_next(args, job)


@registry.worker("invoice")
def invoice(args: dict[str, Any], job: Job) -> dict[str, Any]:
    return {"tenant": tenant.get(), "order": args["order"]}


@registry.worker("notify")
async def notify(args: dict[str, Any], job: Job) -> str:
    return f"notified {tenant.get()}"


@registry.on_enqueue
def count_enqueued(event: Enqueued) -> None:
    counts[f"enqueued:{event.worker}"] += 1


@registry.on_stop
def count_outcome(stopped: Stopped) -> None:
    counts[f"{stopped.job.queue}:{stopped.outcome}"] += 1


@registry.on_discard
def alert(event: Discarded) -> None:
    counts["alerts"] += 1  # page someone: the job will not run again
