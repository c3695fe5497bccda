"""Running one claimed job's worker and turning what happened into an :class:`ExecutionResult`.

Used in-process by the testing helpers and the in-process pool mode, and inside each executor
process of the supervised pool.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from kickside_engine.clock import utcnow
from kickside_engine.errors import ArgsDecodeError
from kickside_engine.lifecycle import ExecutionResult, ResultKind, done_result
from kickside_engine.models import ClaimedJob, Job
from kickside_engine.outcomes import (
    Cancel,
    Discard,
    Done,
    ResultNotStorableError,
    Snooze,
    retry_hint_ms,
    storable_result,
)
from kickside_engine.progress import begin_reporting, end_reporting
from kickside_engine.workers import WorkerRegistry, WorkerSpec

MAX_TRACEBACK_FRAMES = 8


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` first (what operators read), then the innermost traceback frames."""
    head = f"{type(exc).__name__}: {exc}".rstrip(": ").rstrip()
    frames = traceback.format_tb(exc.__traceback__)[-MAX_TRACEBACK_FRAMES:]
    if not frames:
        return head
    return head + "\nTraceback (most recent call last):\n" + "".join(frames).rstrip()


def unknown_worker_message(worker: str) -> str:
    """What the run history says of a job handed back by an executor without its worker."""
    return (
        f"unknown worker: {worker} is not in this executor's code; the job was handed back "
        "for a pool that has it, without using an attempt"
    )


def resolve(registry: WorkerRegistry, job: Job) -> tuple[WorkerSpec | None, Any, str | None]:
    """The worker and decoded args for ``job``, or the reason it cannot run here: no such
    worker (``spec`` is None: hand the job back) or args that do not decode (discard it)."""
    spec = registry.get(job.worker)
    if spec is None:
        return None, None, unknown_worker_message(job.worker)
    try:
        return spec, spec.decode_args(job.args), None
    except ArgsDecodeError as exc:  # names the type and each bad field already
        return spec, None, f"args don't decode for {job.worker}: {exc}"
    except Exception as exc:  # any decoding failure means retrying cannot help
        return spec, None, f"args don't decode for {job.worker}: {type(exc).__name__}: {exc}"


def outcome_result(value: Any, started: float) -> ExecutionResult:
    """Map what ``perform`` returned to a result.

    Any value that is not an outcome is the job's result, as ``Done(result=value)`` is; one
    that cannot be stored fails the attempt, naming its type or size.
    """
    now = utcnow()
    ms = _elapsed_ms(started)
    if value is None:
        return done_result(now, ms)
    if isinstance(value, Done):
        stored = value.result
        if stored is not None:
            try:
                stored = storable_result(stored)
            except ResultNotStorableError as exc:
                return ExecutionResult(ResultKind.ERROR, now, ms, error=str(exc))
        return ExecutionResult(
            ResultKind.DONE,
            now,
            ms,
            demand_satisfied=value.demand_satisfied,
            park=value.park,
            result=stored,
        )
    if isinstance(value, Snooze):
        return ExecutionResult(ResultKind.SNOOZE, now, ms, snooze=_nonnegative(value.delay))
    if isinstance(value, Cancel):
        return ExecutionResult(ResultKind.CANCEL, now, ms, error=str(value.reason))
    if isinstance(value, Discard):
        return ExecutionResult(ResultKind.DISCARD, now, ms, error=str(value.reason))
    try:
        return ExecutionResult(ResultKind.DONE, now, ms, result=storable_result(value))
    except ResultNotStorableError as exc:
        return ExecutionResult(ResultKind.ERROR, now, ms, error=str(exc))


def exception_result(exc: BaseException, started: float) -> ExecutionResult:
    """Map an exception raised by ``perform`` to a failed attempt."""
    return ExecutionResult(
        ResultKind.ERROR,
        utcnow(),
        _elapsed_ms(started),
        error=describe_exception(exc),
        retry_after_ms=retry_hint_ms(exc),
    )


def _elapsed_ms(started: float) -> int:
    return max(0, int((time.monotonic() - started) * 1000))


def _nonnegative(delay: timedelta) -> timedelta:
    return delay if delay > timedelta(0) else timedelta(0)


def _ready(
    registry: WorkerRegistry, claimed: ClaimedJob
) -> tuple[WorkerSpec, Any] | ExecutionResult:
    """The worker and decoded args, or the result of an attempt that cannot run: an unknown
    worker (handed back) or args that do not decode (discarded)."""
    spec, args, problem = resolve(registry, claimed.job)
    if spec is None:
        return ExecutionResult(ResultKind.UNKNOWN_WORKER, utcnow(), 0, error=problem)
    if problem is not None:
        return ExecutionResult(ResultKind.DISCARD, utcnow(), 0, error=problem)
    return spec, args


#: Where an executor sends a running job's progress (at most once a second per job).
ProgressSink = Callable[[Any], None]


def execute(
    registry: WorkerRegistry, claimed: ClaimedJob, progress: ProgressSink | None = None
) -> ExecutionResult:
    """Run the claimed job's worker in this thread and return what happened.

    An ``async def`` worker runs to its end on an event loop of its own (``asyncio.run``): the
    testing helpers run it so; the pool runs it on an async executor (:func:`execute_async`).
    ``progress`` takes the job's reports while it runs (throttled, see
    :mod:`kickside_engine.progress`); the last one it did not take comes back with the result.
    """
    spec = registry.get(claimed.job.worker)
    if spec is not None and spec.is_async:
        return asyncio.run(execute_async(registry, claimed, progress))
    started = time.monotonic()
    ready = _ready(registry, claimed)
    if isinstance(ready, ExecutionResult):
        return ready
    spec, args = ready
    # Middleware, when the registry has some, is part of the execution: it fails like the worker.
    perform = registry.hooks.perform_of(spec) if registry.hooks.sync_middleware else spec.perform
    attempt = begin_reporting(claimed.job, progress)
    try:
        value = perform(args, claimed.job)
    except Exception as exc:
        result = exception_result(exc, started)
    else:
        result = outcome_result(value, started)
    finally:
        last = end_reporting(attempt)
    return result if last is None else replace(result, progress=last)


async def execute_async(
    registry: WorkerRegistry, claimed: ClaimedJob, progress: ProgressSink | None = None
) -> ExecutionResult:
    """Run the claimed job's worker on the running event loop and return what happened.

    A sync worker is called in place (it blocks the loop while it runs), inside the sync
    middleware; an async worker inside the async middleware. Cancelling the task
    raises ``CancelledError`` in the worker, whose ``finally`` blocks run; the cancellation
    then propagates (the caller says why it cancelled). ``progress`` as for :func:`execute`.
    """
    started = time.monotonic()
    ready = _ready(registry, claimed)
    if isinstance(ready, ExecutionResult):
        return ready
    spec, args = ready
    hooks = registry.hooks
    perform = hooks.perform_of(spec) if hooks.wraps(spec) else spec.perform
    attempt = begin_reporting(claimed.job, progress)
    try:
        value = perform(args, claimed.job)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        result = exception_result(exc, started)
    else:
        result = outcome_result(value, started)
    finally:
        last = end_reporting(attempt)
    return result if last is None else replace(result, progress=last)


def execute_with_timeout(
    registry: WorkerRegistry,
    claimed: ClaimedJob,
    timeout: timedelta | None,
    progress: ProgressSink | None = None,
) -> ExecutionResult:
    """Run the job in a helper thread; past ``timeout`` record a timeout failure.

    A thread cannot be killed: the abandoned worker keeps running until it returns. Use the
    supervised pool's executor processes where a hung job must really be stopped.
    """
    if timeout is None:
        return execute(registry, claimed, progress)
    box: list[ExecutionResult] = []
    started = time.monotonic()
    thread = threading.Thread(
        target=lambda: box.append(execute(registry, claimed, progress)),
        name=f"kickside-job-{claimed.job.id}",
        daemon=True,
    )
    thread.start()
    thread.join(timeout.total_seconds())
    if box:
        return box[0]
    return timeout_result(timeout, started)


def timeout_result(timeout: timedelta, started: float) -> ExecutionResult:
    """A timeout failure after ``timeout``."""
    return ExecutionResult(
        ResultKind.TIMEOUT,
        utcnow(),
        _elapsed_ms(started),
        error=f"timeout: the attempt ran longer than its max execution of "
        f"{timeout.total_seconds():g}s and was stopped",
    )


def max_execution(job: Job, worker_timeout: timedelta | None, default: timedelta) -> timedelta:
    """Per-job ``max_execution_ms``, else the worker's timeout, else the policy default."""
    if job.max_execution_ms:
        return timedelta(milliseconds=job.max_execution_ms)
    if worker_timeout is not None:
        return worker_timeout
    return default
