"""Middleware around every execution, and lifecycle hooks for metrics and alerts.

Both are declared on the application's :class:`~kickside_engine.workers.WorkerRegistry`, the
one object the pool loads, so one declaration serves the executors, the supervisor and the
enqueuing side::

    @registry.middleware
    def tenant(call_next, args, job):
        with tenant_context(job.meta.get("tenant")):
            return call_next(args, job)

    @registry.on_stop
    def count(stopped):
        metrics.inc(stopped.job.queue, stopped.outcome)

**Middleware** ``fn(call_next, args, job)`` wraps each execution in the executor; it calls
``call_next(args, job)`` (possibly with other args) and returns what the worker returned, or a
value of its own. The first registered is outermost. A middleware is part of the execution:
one that raises fails the attempt like the worker raising. A plain ``def`` middleware wraps the
sync workers, an ``async def`` one the ``async def`` workers (where ``call_next`` returns an
awaitable): a sync wrapper around a coroutine would return before the coroutine ran, so it
never wraps an async worker; register an async twin for those.

**Hooks** are called with one event each: ``on_enqueue(Enqueued)`` after a job built from a
registered worker (``worker.new(...)``) is inserted; ``on_start(Job)`` when the pool hands a
job to an executor, ``on_stop(Stopped)`` when its outcome comes back, ``on_discard(Discarded)``
when an outcome or the Lifeline discards a job, ``on_rescue(Rescued)`` when the Lifeline
rescues one. ``enqueue_meta`` providers ``fn()`` return meta entries added to each job of the
registry's workers when it is inserted (a trace context, a tenant), under the builder's own.
A hook that raises is logged on ``kickside.hooks`` (redacted) and ignored: it never fails a
job or stops a pool. Hooks run on the thread that noticed the event (the pool's
supervisor thread for most), so keep them quick.

With nothing registered, nothing is wrapped or called: the per-job path checks one list.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kickside_engine.callables import refused_signature
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.models import Job, JobState
from kickside_engine.redact import redact_text

if TYPE_CHECKING:
    from kickside_engine.workers import Perform, WorkerSpec

log = logging.getLogger("kickside.hooks")

#: ``fn(call_next, args, job)``; ``call_next(args, job)`` runs the rest of the chain.
Middleware = Callable[[Callable[[Any, Job], Any], Any, Job], Any]
HOOK_NAMES = ("on_enqueue", "on_start", "on_stop", "on_discard", "on_rescue")


@dataclass(frozen=True, slots=True)
class Enqueued:
    """A job an enqueue inserted (or, ``duplicate``, found instead: a unique or slot job)."""

    id: uuid.UUID
    worker: str
    queue: str
    state: JobState
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class Stopped:
    """An attempt's end, as the pool took it from its executor (before it is recorded).

    ``outcome`` is ``done``, ``error``, ``snooze``, ``cancel``, ``discard``, ``timeout``,
    ``crash`` or ``unknown_worker``; ``error`` is redacted.
    """

    job: Job
    outcome: str
    duration_ms: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Discarded:
    """A job discarded: by its outcome, out of attempts, or expired on its last attempt."""

    job_id: uuid.UUID
    worker: str
    queue: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Rescued:
    """A job whose lease expired, put back to work by the Lifeline (or ``discarded``)."""

    job_id: uuid.UUID
    worker: str
    queue: str
    discarded: bool = False


class Hooks:
    """What a registry holds for middleware and hooks; see the module's docstring."""

    def __init__(self) -> None:
        self.sync_middleware: list[Middleware] = []
        self.async_middleware: list[Middleware] = []
        self.on_enqueue: list[Callable[[Enqueued], object]] = []
        self.on_start: list[Callable[[Job], object]] = []
        self.on_stop: list[Callable[[Stopped], object]] = []
        self.on_discard: list[Callable[[Discarded], object]] = []
        self.on_rescue: list[Callable[[Rescued], object]] = []
        #: ``fn()`` returning meta entries for each job enqueued (see :func:`enqueue_meta`).
        self.enqueue_meta: list[Callable[[], Mapping[str, Any] | None]] = []
        self._chains: dict[str, Perform] = {}

    def lifecycle_copy(self) -> Hooks:
        """A copy of the lifecycle hooks (no middleware): what a pool calls, so that hooks it
        adds (its metrics) stay its own, never the application registry's."""
        copy = Hooks()
        for name in HOOK_NAMES:
            getattr(copy, name).extend(getattr(self, name))
        return copy

    def add_middleware(self, fn: Middleware) -> None:
        """Append ``fn`` (innermost so far) to the chain of its kind (sync or async)."""
        if not callable(fn):
            raise InvalidArgumentError(f"middleware must be callable, got {fn!r}")
        if (signature := refused_signature(fn, 3)) is not None:
            raise InvalidArgumentError(
                f"middleware {_name(fn)} must take (call_next, args, job), got {signature}"
            )
        chain = self.async_middleware if _is_async(fn) else self.sync_middleware
        chain.append(fn)
        self._chains.clear()

    def add_hook(self, name: str, fn: Callable[[Any], object]) -> None:
        """Append ``fn`` to the hooks called on event ``name`` (one of :data:`HOOK_NAMES`)."""
        if name not in HOOK_NAMES:
            raise InvalidArgumentError(f"unknown hook {name!r}: one of {', '.join(HOOK_NAMES)}")
        if not callable(fn) or _is_async(fn):
            raise InvalidArgumentError(f"hook {name} must be a plain function, got {fn!r}")
        getattr(self, name).append(fn)

    def add_enqueue_meta(self, fn: Callable[[], Mapping[str, Any] | None]) -> None:
        """Append ``fn`` to the providers of meta entries added to each job at enqueue."""
        if not callable(fn) or _is_async(fn):
            raise InvalidArgumentError(f"enqueue_meta must be a plain function, got {fn!r}")
        self.enqueue_meta.append(fn)

    def wraps(self, spec: WorkerSpec) -> bool:
        """Whether middleware of ``spec``'s kind is registered."""
        return bool(self.async_middleware if spec.is_async else self.sync_middleware)

    def perform_of(self, spec: WorkerSpec) -> Perform:
        """``spec.perform`` inside the middleware of its kind (composed once per worker)."""
        chain = self._chains.get(spec.name)
        if chain is None:
            chain = spec.perform
            for fn in reversed(self.async_middleware if spec.is_async else self.sync_middleware):
                chain = _async_layer(fn, chain) if spec.is_async else _sync_layer(fn, chain)
            self._chains[spec.name] = chain
        return chain


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - a callable object's async __call__
    )


def _sync_layer(fn: Middleware, call_next: Perform) -> Perform:
    def layer(args: Any, job: Job) -> Any:
        return fn(call_next, args, job)

    return layer


def _async_layer(fn: Middleware, call_next: Perform) -> Perform:
    async def layer(args: Any, job: Job) -> Any:
        return await fn(call_next, args, job)

    return layer  # type: ignore[return-value]


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def fire_stop(
    hooks: Hooks, job: Job, outcome: str, duration_ms: int, error: str | None, *, discarded: bool
) -> None:
    """Call the ``on_stop`` hooks, then ``on_discard`` when the outcome discards the job."""
    fire(hooks.on_stop, Stopped(job, outcome, duration_ms, error))
    if discarded:
        fire(hooks.on_discard, Discarded(job.id, job.worker, job.queue, error))


def fire(hooks: list[Callable[[Any], object]], event: object) -> None:
    """Call each hook with ``event``; one that raises is logged (redacted), never raised."""
    for hook in hooks:
        try:
            hook(event)
        except Exception as exc:
            _log_failure(hook, event, exc)


def enqueue_meta(hooks: Hooks, meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` with the entries of each ``enqueue_meta`` provider added under it: a key that
    ``meta`` already has keeps its value. A provider that raises, or returns other than a
    mapping, is logged (redacted) and skipped: the job is enqueued all the same."""
    added: dict[str, Any] = {}
    for provider in hooks.enqueue_meta:
        try:
            entries = provider()
            if entries is not None and not isinstance(entries, Mapping):
                raise TypeError(f"returned {type(entries).__name__}, not a mapping")
        except Exception as exc:
            _log_failure(provider, "enqueue_meta", exc)
            continue
        added.update(entries or {})
    return {**added, **meta}


def _log_failure(hook: object, event: object, exc: Exception) -> None:
    # The traceback goes in the record (exc_info): Kickside's formatters redact it too.
    log.error(
        "hook %s failed: %s",
        _name(hook),
        redact_text(f"{type(exc).__name__}: {exc}"),
        exc_info=exc,
        extra={
            "hook": _name(hook),
            "event": event if isinstance(event, str) else type(event).__name__,
        },
    )


__all__ = [
    "HOOK_NAMES",
    "Discarded",
    "Enqueued",
    "Hooks",
    "Middleware",
    "Rescued",
    "Stopped",
    "enqueue_meta",
    "fire",
    "fire_stop",
]
