"""Testing helpers for applications that embed Kickside (Oban.Testing's equivalents).

Tests run in manual mode: an insert writes a row and nothing executes until the test says so
(there is no inline mode: enqueueing happens inside the caller's transaction, and running the
job there would run it before the commit). Drive jobs with :func:`drain_jobs`, check the queue
with :func:`assert_enqueued` / :func:`refute_enqueued`, and unit-test a worker with
:func:`perform_job`.

This module does not need pytest (use it under unittest or any runner). The ``kickside_db``
fixture, a migrated SQLite database in the test's temporary directory, lives in
:mod:`kickside_engine.pytest_plugin`, which pytest loads by itself once Kickside is installed.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from collections import Counter
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from kickside_engine.api import claim, record
from kickside_engine.backoff import DEFAULT_BACKOFF
from kickside_engine.clock import utcnow
from kickside_engine.execution import execute_with_timeout
from kickside_engine.hooks import Hooks, fire, fire_stop
from kickside_engine.job_row import stored_args
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.models import ClaimedJob, Job, JobKind, JobState
from kickside_engine.outcomes import Done, Outcome, storable_result
from kickside_engine.plugins.stager import stage
from kickside_engine.progress import begin_reporting, end_reporting
from kickside_engine.redact import redact_args
from kickside_engine.store.database import Database
from kickside_engine.store.jobs import (
    due_jobs_by_worker,
    due_queues,
    make_due,
    waiting_jobs,
)
from kickside_engine.typed_args import encode_args
from kickside_engine.workers import WorkerRegistry, WorkerSpec, spec_of

MAX_DRAIN_ROUNDS = 10_000


@dataclass
class DrainResult:
    """How many attempts ended each way during a drain."""

    counts: Counter[str] = field(default_factory=Counter)
    #: Due jobs left waiting because the registry has no worker for them, by worker name
    #: (a pool leaves them for pools that have the worker; so does a drain).
    unknown_workers: Counter[str] = field(default_factory=Counter)

    def __getattr__(self, name: str) -> int:
        if name in {k.value for k in ResultKind} | {"total"}:
            return sum(self.counts.values()) if name == "total" else self.counts[name]
        raise AttributeError(name)

    @property
    def completed(self) -> int:
        return self.counts["done"]

    @property
    def failed(self) -> int:
        return self.counts["error"] + self.counts["timeout"] + self.counts["crash"]


def _due_queues(db: Database, queue: str | None, now: datetime) -> list[str]:
    if queue is not None:
        return [queue]
    with db.read() as conn:
        return due_queues(db, conn, now)


def drain_jobs(
    db: Database,
    registry: WorkerRegistry,
    *,
    queue: str | None = None,
    with_scheduled: bool = False,
    with_recursion: bool = True,
    node: str = "test:drain",
    timeout: timedelta | None = None,
) -> DrainResult:
    """Run due jobs synchronously in this thread until none is left; return the tally.

    ``queue=None`` drains every queue. ``with_scheduled`` also runs scheduled and retryable
    jobs now, as if their time had come (so a failing job is retried until it is discarded).
    ``with_recursion=False`` stops after one pass, leaving jobs that jobs enqueued. Jobs of
    workers the registry does not have are left waiting, as a pool leaves them, and counted in
    ``unknown_workers``. The registry's middleware wraps each job and its pool hooks
    (``on_start``, ``on_stop``, ``on_discard``) are called as a pool calls them.
    """
    steps = drain_steps(db, registry, queue, with_scheduled, with_recursion, node)
    claimed, result = advance(steps, None)
    while claimed is not None:
        claimed, result = advance(steps, execute_with_timeout(registry, claimed, timeout))
    assert result is not None
    return result


DrainSteps = Generator[ClaimedJob, "ExecutionResult | None", DrainResult]


def drain_steps(
    db: Database,
    registry: WorkerRegistry,
    queue: str | None,
    with_scheduled: bool,
    with_recursion: bool,
    node: str,
) -> DrainSteps:
    """A drain's database side, for :func:`drain_jobs` and its async twin alike: yields each
    claimed job, takes back its result (recorded at once), and returns the tally."""
    result = DrainResult()
    hooks = registry.hooks
    for _ in range(MAX_DRAIN_ROUNDS):
        now = utcnow()
        if with_scheduled:
            _make_due(db, queue, now)
        stage(db, now)
        ran = 0
        for name in _due_queues(db, queue, now):
            while True:
                batch = claim(
                    db, queue=name, node=node, limit=10, now=now, workers=registry.names()
                )
                if not batch:
                    break
                for claimed in batch:
                    if hooks.on_start:
                        fire(hooks.on_start, claimed.job)
                    outcome = yield claimed
                    assert outcome is not None
                    record(db, [(claimed, outcome)], registry=registry)
                    if hooks.on_stop or hooks.on_discard:
                        _stopped(hooks, registry, claimed, outcome)
                    result.counts[outcome.kind.value] += 1
                    ran += 1
                if not with_recursion:
                    break
        if ran == 0 or not with_recursion:
            result.unknown_workers.update(_unknown_workers(db, registry, queue, now))
            return result
    raise RuntimeError(f"drain_jobs gave up after {MAX_DRAIN_ROUNDS} rounds (a job loops?)")


def _stopped(
    hooks: Hooks, registry: WorkerRegistry, claimed: ClaimedJob, outcome: ExecutionResult
) -> None:
    """The ``on_stop`` (and ``on_discard``) hooks for an attempt drained, as a pool calls them."""
    spec = registry.get(claimed.job.worker)
    backoff = spec.backoff_for(claimed.job.is_slot) if spec is not None else DEFAULT_BACKOFF
    settled = settlement_for(claimed, outcome, backoff=backoff)
    discarded = settled.values.get("state") == JobState.DISCARDED.value
    kind, ms, error = outcome.kind.value, outcome.duration_ms, settled.run_error
    fire_stop(hooks, claimed.job, kind, ms, error, discarded=discarded)


def advance(
    steps: DrainSteps, outcome: ExecutionResult | None
) -> tuple[ClaimedJob | None, DrainResult | None]:
    """Hand ``outcome`` to the drain and take its next job, or (None, the tally) at its end."""
    try:
        return steps.send(outcome), None
    except StopIteration as done:
        return None, done.value


def _unknown_workers(
    db: Database, registry: WorkerRegistry, queue: str | None, now: datetime
) -> dict[str, int]:
    with db.read() as conn:
        return due_jobs_by_worker(db, conn, now, queue=queue, except_workers=registry.names())


def _make_due(db: Database, queue: str | None, now: datetime) -> None:
    with db.begin() as conn:
        make_due(db, conn, now, queue=queue)


def _matching(
    db: Database,
    *,
    worker: str | None,
    queue: str | None,
    args: Any,
    state: JobState | str | None,
    tags: list[str] | None,
    scheduled_at: datetime | None,
    delta: timedelta,
) -> tuple[list[Job], list[Job]]:
    with db.read() as conn:
        jobs = waiting_jobs(db, conn, JobState(state) if state is not None else None)
    wanted_args = json.loads(json.dumps(encode_args(args))) if args is not None else None
    matches = []
    for j in jobs:
        if worker is not None and j.worker != worker:
            continue
        if queue is not None and j.queue != queue:
            continue
        if wanted_args is not None and any(
            j.args.get(k, _MISSING) != v for k, v in wanted_args.items()
        ):
            continue
        if tags is not None and not set(tags) <= set(j.tags):
            continue
        if scheduled_at is not None and abs(j.scheduled_at - scheduled_at) > delta:
            continue
        matches.append(j)
    return matches, jobs


_MISSING = object()


def _worker_name(worker: Any) -> str | None:
    """A worker given by name, by its decorated function or class, or None for any."""
    return worker if worker is None or isinstance(worker, str) else spec_of(worker).name


def _describe(jobs: list[Job]) -> str:
    if not jobs:
        return "  (no jobs enqueued)"
    return "\n".join(
        f"  {j.worker} queue={j.queue} state={j.state.value} args={redact_args(j.args, j.meta)}"
        f" tags={j.tags}"
        f" scheduled_at={j.scheduled_at.isoformat()}"
        for j in jobs[:20]
    )


def assert_enqueued(
    db: Database,
    *,
    worker: Any = None,
    queue: str | None = None,
    args: Any = None,
    state: JobState | str | None = None,
    tags: list[str] | None = None,
    scheduled_at: datetime | None = None,
    delta: timedelta = timedelta(seconds=1),
    count: int | None = None,
) -> list[Job]:
    """Assert that matching jobs are enqueued (not yet finished); return them.

    ``args`` (a dict, or a typed value compared by its JSON encoding) matches a subset of the
    stored args; ``worker`` is a name or a decorated worker.
    """
    name = _worker_name(worker)
    matches, jobs = _matching(
        db,
        worker=name,
        queue=queue,
        args=args,
        state=state,
        tags=tags,
        scheduled_at=scheduled_at,
        delta=delta,
    )
    wanted = {"worker": name, "queue": queue, "args": args, "state": state, "tags": tags}
    wanted = {k: v for k, v in wanted.items() if v is not None}
    if not matches or (count is not None and len(matches) != count):
        found = f"found {len(matches)}" if matches else "found none"
        raise AssertionError(
            f"expected {count or 'a'} job(s) matching {wanted}, {found}; enqueued:\n"
            + _describe(jobs)
        )
    return matches


def refute_enqueued(
    db: Database,
    *,
    worker: Any = None,
    queue: str | None = None,
    args: Any = None,
    state: JobState | str | None = None,
    tags: list[str] | None = None,
) -> None:
    """Assert that no matching job is enqueued."""
    name = _worker_name(worker)
    matches, _ = _matching(
        db,
        worker=name,
        queue=queue,
        args=args,
        state=state,
        tags=tags,
        scheduled_at=None,
        delta=timedelta(0),
    )
    if matches:
        raise AssertionError(f"expected no matching job, found:\n{_describe(matches)}")


def perform_job(
    worker: Any,
    args: Any = None,
    *,
    attempt: int = 1,
    max_attempts: int | None = None,
    tags: list[str] | None = None,
    meta: Mapping[str, Any] | None = None,
    progress: list[Any] | None = None,
) -> Outcome:
    """Run one worker's ``perform`` with ``args`` as a stored job would see them.

    ``args`` is a dict or an instance of the worker's ``args_type``. Args are encoded, checked
    and make a JSON round trip first, as enqueue does (args JSON cannot hold as they are raise
    :class:`~kickside_engine.errors.InvalidArgumentError`), are decoded with the worker's
    ``args_type`` as an executor decodes them (args that do not decode raise
    :class:`~kickside_engine.errors.ArgsDecodeError`, where a pool discards the job), and the
    return value is normalised as a pool stores it (``None`` becomes :class:`Done`; any other
    value that is not an outcome becomes ``Done(result=value)``, its JSON form; a result that
    cannot be stored raises :class:`~kickside_engine.outcomes.ResultNotStorableError`).
    The registry's middleware wraps the call, as in an executor. Exceptions propagate, so a
    test can assert on them. An ``async def`` worker is run to its end with ``asyncio.run``;
    from inside a running event loop (an async test) use
    :func:`~kickside_engine.async_testing.perform_job_async`. ``job.report_progress`` works
    as in a pool (a bad value raises
    :class:`~kickside_engine.progress.ProgressNotStorableError`); each value it accepts is
    appended to ``progress`` when a list is given.
    """
    spec, decoded, job = job_to_perform(
        worker, args, attempt=attempt, max_attempts=max_attempts, tags=tags, meta=meta
    )
    running = begin_reporting(job, on_report=None if progress is None else progress.append)
    try:
        value = middleware_wrapped(spec)(decoded, job)
        if inspect.isawaitable(value):  # an async def worker: run it to its end here
            value = asyncio.run(_awaited(value))
    finally:
        end_reporting(running)
    return performed(value)


def middleware_wrapped(spec: WorkerSpec) -> Any:
    """``spec``'s perform inside the middleware of its registry, as an executor runs it."""
    hooks = spec.hooks
    return hooks.perform_of(spec) if hooks is not None and hooks.wraps(spec) else spec.perform


def job_to_perform(
    worker: Any,
    args: Any,
    *,
    attempt: int,
    max_attempts: int | None,
    tags: list[str] | None,
    meta: Mapping[str, Any] | None,
) -> tuple[WorkerSpec, Any, Job]:
    """The worker's spec, its decoded args and the executing job :func:`perform_job` hands it."""
    spec = spec_of(worker)
    stored = stored_args(spec.encode_args(args))
    now = utcnow()
    job = Job(
        id=uuid.uuid4(),
        kind=JobKind.ONESHOT,
        state=JobState.EXECUTING,
        queue=spec.queue,
        worker=spec.name,
        args=stored,
        meta=dict(meta or {}),
        tags=list(tags or []),
        errors=[],
        attempt=attempt,
        max_attempts=max_attempts or spec.max_attempts,
        priority=spec.priority,
        unique_key=None,
        namespace=None,
        scope=None,
        identity_key=None,
        concurrency_key=None,
        capacity_group=None,
        demand_pending=False,
        control_pending=False,
        demand_seq=0,
        lease_owner="test:perform",
        lease_token=uuid.uuid4(),
        lease_expires_at=now + timedelta(minutes=5),
        rescue_count=0,
        max_execution_ms=None,
        inserted_at=now,
        scheduled_at=now,
        attempted_at=now,
        completed_at=None,
        cancelled_at=None,
        discarded_at=None,
        finalized_at=None,
        updated_at=now,
    )
    return spec, spec.decode_args(stored), job


def performed(value: Any) -> Outcome:
    """What ``perform`` returned, normalised as a pool stores it (see :func:`perform_job`)."""
    if value is None:
        return Done()
    if isinstance(value, Done):
        if value.result is None:
            return value
        return replace(value, result=storable_result(value.result))
    if isinstance(value, Outcome):
        return value
    return Done(result=storable_result(value))


async def _awaited(value: Any) -> Any:
    return await value
