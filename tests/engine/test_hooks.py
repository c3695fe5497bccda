"""Middleware through the testing helpers, ``on_enqueue`` on both backends, and what the
registry refuses when middleware or hooks are declared."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from kickside_engine import (
    Database,
    Done,
    InvalidArgumentError,
    Job,
    JobBuilder,
    JobState,
    WorkerRegistry,
    WorkerSpec,
    enqueue,
    enqueue_fanout,
    enqueue_many,
    get_job,
)
from kickside_engine.hooks import Discarded, Enqueued, Stopped
from kickside_engine.testing import drain_jobs, perform_job


def _registry(calls: list[str]) -> WorkerRegistry:
    registry = WorkerRegistry()

    @registry.middleware
    def first(call_next: Callable[[Any, Job], Any], args: Any, job: Job) -> Any:
        calls.append("first")
        return call_next({**args, "seen_by": "first"}, job)

    @registry.middleware
    def second(call_next: Callable[[Any, Job], Any], args: Any, job: Job) -> Any:
        calls.append("second")
        if args.get("refuse"):
            raise PermissionError("tenant suspended")
        return call_next(args, job)

    @registry.middleware
    async def async_only(call_next: Callable[[Any, Job], Any], args: Any, job: Job) -> Any:
        calls.append("async")
        return {"wrapped": await call_next(args, job)}

    @registry.worker("sync_job")
    def sync_job(args: dict[str, Any], job: Job) -> Any:
        calls.append("sync_job")
        return args.get("seen_by")

    @registry.worker("async_job")
    async def async_job(args: dict[str, Any], job: Job) -> Any:
        calls.append("async_job")
        return "ran"

    return registry


def test_perform_job_runs_the_registry_middleware_in_order() -> None:
    calls: list[str] = []
    registry = _registry(calls)
    assert perform_job(registry.get("sync_job"), {}) == Done(result="first")
    assert calls == ["first", "second", "sync_job"]
    calls.clear()
    # An async worker gets the async middleware only.
    assert perform_job(registry.get("async_job"), {}) == Done(result={"wrapped": "ran"})
    assert calls == ["async", "async_job"]
    with pytest.raises(PermissionError, match="tenant suspended"):
        perform_job(registry.get("sync_job"), {"refuse": True})


def test_drain_jobs_runs_middleware_and_a_raising_one_fails_the_attempt(db: Database) -> None:
    calls: list[str] = []
    registry = _registry(calls)
    sync_job, async_job = registry.get("sync_job"), registry.get("async_job")
    assert sync_job is not None and async_job is not None
    ok = sync_job.new({}).insert(db)
    wrapped = async_job.new({}).insert(db)
    refused = sync_job.new({"refuse": True}).max_attempts(1).insert(db)
    result = drain_jobs(db, registry)
    assert (result.done, result.error) == (2, 1)
    assert get_job(db, ok.id).result == "first"  # type: ignore[union-attr]
    assert get_job(db, wrapped.id).result == {"wrapped": "ran"}  # type: ignore[union-attr]
    failed = get_job(db, refused.id)
    assert failed is not None and failed.state is JobState.DISCARDED
    assert "PermissionError: tenant suspended" in failed.errors[-1].error


def test_the_chain_is_built_once_per_worker_not_per_job() -> None:
    registry = _registry([])
    spec = registry.get("sync_job")
    assert spec is not None
    assert registry.hooks.perform_of(spec) is registry.hooks.perform_of(spec)
    bare = WorkerRegistry()
    plain = bare.register(WorkerSpec(name="plain", perform=lambda a, j: None))
    assert not bare.hooks.wraps(plain)  # nothing registered: the worker runs unwrapped
    assert perform_job(plain, {}) == Done()
    assert bare.hooks._chains == {}  # no chain was built for it


def test_drain_jobs_without_middleware_builds_no_chain(db: Database) -> None:
    bare = WorkerRegistry()
    plain = bare.register(WorkerSpec(name="plain", perform=lambda a, j: {"ok": True}))
    inserted = plain.new({}).insert(db)
    assert drain_jobs(db, bare).done == 1
    assert get_job(db, inserted.id).result == {"ok": True}  # type: ignore[union-attr]
    assert bare.hooks._chains == {}


def test_middleware_and_hooks_are_checked_when_declared() -> None:
    registry = WorkerRegistry()
    with pytest.raises(InvalidArgumentError, match=r"must take \(call_next, args, job\)"):
        registry.middleware(lambda call_next, args: None)  # type: ignore[arg-type,misc]

    # Extra parameters with defaults are fine: it can be called with the three.
    def with_options(call_next: Any, args: Any, job: Job, *, span: str = "job") -> Any:
        return call_next(args, job)

    assert registry.middleware(with_options) is with_options
    with pytest.raises(InvalidArgumentError, match="hook on_stop must be a plain function"):

        @registry.on_stop
        async def stop(event: object) -> None: ...

    with pytest.raises(InvalidArgumentError, match="middleware must be callable"):
        registry.middleware("tracing")  # type: ignore[arg-type]


def _enqueue_registry(seen: list[Enqueued], *, raising: bool = False) -> WorkerRegistry:
    registry = WorkerRegistry()
    if raising:

        @registry.on_enqueue
        def broken(event: Enqueued) -> None:
            raise RuntimeError("metrics backend down: token=abc123")

    registry.on_enqueue(seen.append)

    @registry.worker("mail", queue="mailers")
    def mail(args: dict[str, Any], job: Job) -> None: ...

    return registry


def test_on_enqueue_sees_every_way_of_inserting(db: Database) -> None:
    seen: list[Enqueued] = []
    registry = _enqueue_registry(seen)
    mail = registry.get("mail")
    assert mail is not None
    one = mail.new({"to": 1}).insert(db)
    many = enqueue_many(db, [mail.new({"to": 2}), mail.new({"to": 3})])
    fanned = enqueue_fanout(db, mail.new(), [{"to": 4}, {"to": 5}])
    slot = mail.new({}).slot("mail", "user", "7", demand=True)
    first_slot = slot.insert(db)
    again = enqueue(db, slot)  # the identity exists: found, not inserted
    expected = [one, *many, *fanned, first_slot, again]
    assert [e.id for e in seen] == [i.id for i in expected]
    assert all(e.worker == "mail" and e.queue == "mailers" for e in seen)
    assert [e.duplicate for e in seen] == [False] * 6 + [True]
    assert seen[0].state is JobState.AVAILABLE
    # A builder made by worker name belongs to no registry: it calls no hook.
    enqueue(db, JobBuilder("mail", {"to": 8}))
    assert len(seen) == 7


def test_on_enqueue_in_the_callers_transaction_fires_at_the_insert(db: Database) -> None:
    seen: list[Enqueued] = []
    mail = _enqueue_registry(seen).get("mail")
    assert mail is not None
    with db.begin() as conn:
        inserted = mail.new({"to": 1}).insert(db, conn=conn)
        assert [e.id for e in seen] == [inserted.id]  # before the caller commits
        conn.rollback()
    assert get_job(db, inserted.id) is None  # documented: the hook saw a job rolled back


def test_a_raising_on_enqueue_hook_is_logged_and_the_job_is_inserted(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="kickside.hooks")
    seen: list[Enqueued] = []
    mail = _enqueue_registry(seen, raising=True).get("mail")
    assert mail is not None
    inserted = mail.new({"to": 1}).insert(db)
    assert get_job(db, inserted.id) is not None
    assert [e.id for e in seen] == [inserted.id]  # the hooks after it still ran
    (record,) = [r for r in caplog.records if r.name == "kickside.hooks"]
    assert ".broken failed: RuntimeError: metrics backend down" in record.getMessage()
    assert "abc123" not in record.getMessage()


def test_a_spec_in_two_registries_gets_each_registrys_hooks() -> None:
    a, b = WorkerRegistry(), WorkerRegistry()
    spec = a.register(WorkerSpec(name="shared", perform=lambda args, job: None))
    copy = b.register(spec)
    assert spec.hooks is a.hooks and copy.hooks is b.hooks
    assert a.get("shared") is spec and b.get("shared") is copy


def test_drain_jobs_calls_the_pool_hooks_as_a_pool_does(db: Database) -> None:
    events: list[tuple[str, str]] = []
    registry = _registry([])

    @registry.on_start
    def started(job: Job) -> None:
        events.append(("start", job.worker))

    @registry.on_stop
    def stopped(event: Stopped) -> None:
        events.append((f"stop:{event.outcome}", event.job.worker))

    @registry.on_discard
    def discarded(event: Discarded) -> None:
        events.append(("discard", event.error or ""))

    sync_job = registry.get("sync_job")
    assert sync_job is not None
    sync_job.new({}).insert(db)
    sync_job.new({"refuse": True}).max_attempts(2).insert(db)
    drain_jobs(db, registry, with_scheduled=True)  # the retry runs too, and is discarded
    assert events[:2] == [("start", "sync_job"), ("stop:done", "sync_job")]
    assert events[2:6] == [("start", "sync_job"), ("stop:error", "sync_job")] * 2
    (kind, error) = events[6]
    assert kind == "discard" and "PermissionError: tenant suspended" in error
    assert len(events) == 7
