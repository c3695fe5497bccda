"""A deterministic demo data set for the dashboard's tests, snapshots and screenshots.

:func:`build_demo_data` fills a migrated database through the engine's API at times derived
from :data:`NOW` (ids from a counter, backoff jitter from a seeded generator), so every view
renders the same on every run when the app's clock is pinned to :data:`NOW`.
"""

from __future__ import annotations

import contextlib
import io
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from unittest import mock

from rich.console import Console
from textual.app import App
from textual.pilot import Pilot
from textual.worker import WorkerCancelled, WorkerFailed, WorkerState

from kickside_engine import ClaimedJob, Database, JobBuilder, enqueue, record
from kickside_engine import claim as claim_jobs
from kickside_engine.control import Actor, cancel_job, pause_queue, retry_job
from kickside_engine.control.capacity import set_capacity
from kickside_engine.lifecycle import ExecutionResult, ResultKind
from kickside_engine.plugins.cron import Recurring, SchedulePublication, cron_tick
from kickside_engine.slots import disable_slot, enqueue_slot, wake_job
from kickside_engine.store.nodes import NodeBeat, heartbeat
from kickside_engine.store.progress import write_progress
from kickside_engine.workers import CapacityDeclaration
from kickside_tui.adapter import Adapter
from kickside_tui.app import KicksideApp

NOW = datetime(2026, 11, 30, 14, 5, 0, tzinfo=UTC)
OPERATOR = Actor(user="oncall", host="ops-laptop")
NODE = "web-1:4242:a1b2"
STALE_NODE = "worker-2:977:c3d4"
CODE = "v2026.11.3"
EXPORTS = CapacityDeclaration(group="exports", settings_namespace="app.capacity")
SCHEDULE = [
    Recurring("cleanup", "0 * * * *", lambda: JobBuilder("cleanup", {}).queue("default")),
    Recurring("weekly_digest", "0 8 * * MON", lambda: JobBuilder("digest", {}).priority(5)),
]


def pinned_clock() -> datetime:
    """The clock the app runs on in tests and screenshots."""
    return NOW


@contextlib.contextmanager
def pinned_ids() -> Iterator[None]:
    """Job ids from a counter and backoff jitter from a seeded generator, while inside."""
    counter = iter(range(1, 1_000_000))

    def next_id() -> uuid.UUID:
        return uuid.UUID(f"019a2b3c-4d5e-7000-8000-{next(counter):012x}")

    state = random.getstate()
    random.seed(20261130)
    try:
        # Rows are built by job_row; a fan-out draws its ids in enqueue.
        with (
            mock.patch("kickside_engine.job_row.uuid7", next_id),
            mock.patch("kickside_engine.enqueue.uuid7", next_id),
        ):
            yield
    finally:
        random.setstate(state)


@dataclass
class DemoIds:
    """Ids of the jobs the tests act on."""

    retryable: uuid.UUID
    available: list[uuid.UUID] = field(default_factory=list)
    executing: list[uuid.UUID] = field(default_factory=list)
    parked_slot: uuid.UUID | None = None
    disabled_slot: uuid.UUID | None = None
    due_slot: uuid.UUID | None = None
    running_slot: uuid.UUID | None = None


def _at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def _run(
    db: Database,
    builder: JobBuilder,
    *,
    at: float,
    took_ms: int = 0,
    result: ResultKind | None = ResultKind.DONE,
    error: str | None = None,
    node: str = NODE,
    lease: float = 30.0,
    park: bool = False,
) -> ClaimedJob:
    """Enqueue ``builder`` at ``at`` seconds from NOW, claim it then, and settle it if asked."""
    inserted = enqueue(db, builder, now=_at(at - 2))
    return _claim_and_settle(
        db,
        inserted.id,
        builder.options.queue,
        at=at,
        took_ms=took_ms,
        result=result,
        error=error,
        node=node,
        lease=lease,
        park=park,
    )


def _claim_and_settle(
    db: Database,
    job_id: uuid.UUID,
    queue: str,
    *,
    at: float,
    took_ms: int,
    result: ResultKind | None,
    error: str | None = None,
    node: str = NODE,
    lease: float = 30.0,
    park: bool = False,
) -> ClaimedJob:
    (claimed,) = claim_jobs(
        db, queue=queue, node=node, now=_at(at), lease=timedelta(seconds=lease), code_version=CODE
    )
    assert claimed.job.id == job_id, "the demo data claims one job at a time"
    if result is not None:
        finished = _at(at + took_ms / 1000)
        record(db, [(claimed, ExecutionResult(result, finished, took_ms, error=error, park=park))])
    return claimed


def build_demo_data(db: Database) -> DemoIds:
    """Fill ``db`` (migrated, empty) with a small, varied, deterministic workload."""
    with pinned_ids():
        return _build(db)


def _build(db: Database) -> DemoIds:
    for name, queues, beat in (
        (NODE, {"default": 10, "mailers": 5, "exports": 2}, -2.0),
        (STALE_NODE, {"default": 4}, -180.0),
    ):
        host, pid, _ = name.split(":")
        published = SchedulePublication(SCHEDULE).document(_at(beat))  # what each pool runs
        heartbeat(
            db,
            NodeBeat(
                name,
                host,
                int(pid),
                queues,
                CODE,
                2 if name == NODE else 0,
                17 if name == NODE else 4,
                _at(-3600),
                schedule=published,
                # The stale node is an older pool: it published no executor kinds.
                executors=[
                    {"kind": "process", "executors": 16, "busy": 1, "slots": 16},
                    {"kind": "async", "executors": 1, "busy": 37, "slots": 100},
                ]
                if name == NODE
                else None,
            ),
            _at(beat),
        )
    # Half an hour of mail: a steady stream, a few failures.
    for i in range(24):
        at = -1750 + i * 73
        fails = i % 7 == 3
        _run(
            db,
            JobBuilder("deliver_email", {"user_id": 100 + i})
            .queue("mailers")
            .tags(["mail", f"user:{100 + i}"])
            .max_attempts(1 if fails else 10),
            at=at,
            took_ms=180 + (i * 37) % 400,
            result=ResultKind.ERROR if fails else ResultKind.DONE,
            error="SMTPError: 451 try later (login=bot password=hunter2)" if fails else None,
        )
    # A job that failed twice and waits for its backoff.
    invoices = (
        JobBuilder(
            "sync_invoices", {"account": 42, "endpoint": "https://billing:s3cret@api.example.com"}
        )
        .tags(["billing", "account:42"])
        .meta({"source": "nightly"})
    )
    first = _run(
        db,
        invoices,
        at=-900,
        took_ms=1250,
        result=ResultKind.ERROR,
        error="RuntimeError: upstream 503 from https://billing:s3cret@api.example.com",
    )
    retry_job(db, first.job.id, OPERATOR, _at(-600))
    _claim_and_settle(
        db,
        first.job.id,
        "default",
        at=-590,
        took_ms=2400,
        result=ResultKind.ERROR,
        error="TimeoutError: read timed out after 2.4s",
    )
    # Final states.
    _run(
        db,
        JobBuilder("charge_card", {"order": 7}).max_attempts(1),
        at=-1200,
        took_ms=90,
        result=ResultKind.DISCARD,
        error="card declined: do not retry",
    )
    cancelled = enqueue(
        db,
        JobBuilder("notify_author", {"post_id": 9}).schedule_in(timedelta(hours=1)),
        now=_at(-1500),
    )
    cancel_job(db, cancelled.id, OPERATOR, _at(-420))
    # Executing now: one healthy lease, one expired and past its max execution.
    healthy = _run(
        db,
        JobBuilder("import_catalog", {"feed": "acme"}).max_execution(timedelta(minutes=5)),
        at=-20,
        result=None,
    )
    # What the import reported so far (its pool writes it so, fenced by the lease).
    write_progress(db, node=NODE, progress={healthy.lease_token: {"fraction": 0.42, "rows": 4200}})
    expired = _run(
        db,
        JobBuilder("rebuild_index", {"shard": 3}).max_execution(timedelta(seconds=60)),
        at=-70,
        result=None,
        node=STALE_NODE,
    )
    # Slots: parked after a run, running with a follow-up, disabled, scheduled, due.
    parked = JobBuilder("sync_tenant", {"tenant": "acme"}).slot("tenants", "acme", "sync")
    parked_id = enqueue_slot(db, parked, now=_at(-300)).id
    _claim_and_settle(
        db, parked_id, "default", at=-299, took_ms=850, result=ResultKind.DONE, park=True
    )
    running = JobBuilder("sync_tenant", {"tenant": "umbrella"}).slot("tenants", "umbrella", "sync")
    running_id = enqueue_slot(db, running, now=_at(-45)).id
    _claim_and_settle(db, running_id, "default", at=-44, took_ms=0, result=None, lease=60)
    wake_job(db, running_id, control=False, now=_at(-10))
    disabled = JobBuilder("sync_tenant", {"tenant": "initech"}).slot("tenants", "initech", "sync")
    disabled_id = enqueue_slot(db, disabled, now=_at(-800)).id
    disable_slot(db, disabled_id, now=_at(-790))
    enqueue_slot(
        db,
        JobBuilder("poll_feed", {"feed": "news"})
        .schedule_in(timedelta(minutes=10))
        .slot("feeds", "news", "poll"),
        now=_at(-60),
    )
    # Capacity: the exports group allows 2 at once and 1 per tenant.
    set_capacity(
        db,
        "app.capacity",
        global_limit=2,
        per_key_limit=1,
        actor=OPERATOR,
        now=_at(-3000),
        create=True,
    )  # set before the first export job declares it
    export = JobBuilder("export_report", {"report": "q3"}, capacity=EXPORTS).queue("exports")
    _run(db, export.concurrency_key("acme"), at=-30, result=None, lease=60)
    for i, key in enumerate(("acme", "acme", "globex")):
        enqueue(db, export.concurrency_key(key).meta({"n": i}), now=_at(-25 + i))
    pause_queue(db, "exports", OPERATOR, _at(-240))
    # Waiting work: mail backlog, reports no node runs, a scheduled digest, a due slot.
    available = [
        enqueue(
            db,
            JobBuilder("deliver_email", {"user_id": 900 + i}).queue("mailers").tags(["mail"]),
            now=_at(-5 + i),
        ).id
        for i in range(3)
    ]
    for i in range(2):
        enqueue(db, JobBuilder("render_report", {"id": i}).queue("reports"), now=_at(-120 + i))
    enqueue(
        db, JobBuilder("send_digest", {"week": 48}).schedule_in(timedelta(hours=2)), now=_at(-100)
    )
    due_slot = JobBuilder("sync_tenant", {"tenant": "globex"}).slot(
        "tenants", "globex", "sync", demand=True
    )
    due_id = enqueue_slot(db, due_slot, now=_at(-3)).id
    cron_tick(db, SCHEDULE, _at(-280))
    return DemoIds(
        retryable=first.job.id,
        available=available,
        executing=[healthy.job.id, expired.job.id],
        parked_slot=parked_id,
        disabled_slot=disabled_id,
        due_slot=due_id,
        running_slot=running_id,
    )


def demo_adapter_kwargs() -> dict[str, Any]:
    """Adapter options that make the views deterministic over the demo data."""
    # No schedule given: the cron table shows what the running node publishes, as in production.
    return {"clock": pinned_clock, "actor": OPERATOR}


def make_app(
    db: Database, *, read_only: bool = False, refresh: float = 60.0, **adapter: Any
) -> KicksideApp:
    """The app the CLI would build, over ``db``; a long refresh so tests drive the reloads."""
    return KicksideApp(Adapter(db, read_only=read_only, **adapter), refresh_seconds=refresh)


def busy(app: App[Any]) -> bool:
    """Whether any worker of ``app`` is still pending or running."""
    return any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers)


async def settle(pilot: Pilot[Any], rounds: int = 100) -> None:
    """Let every load and the messages it posts finish (bounded)."""
    app = pilot.app
    for _ in range(rounds):
        running = [w for w in app.workers if w.state is WorkerState.RUNNING]
        for worker in running:
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await worker.wait()
        await pilot.pause(0.01 if not running else None)
        if not busy(app):
            await pilot.pause()
            if not busy(app):
                return
    raise AssertionError("the app kept starting workers")


async def wait_until(
    pilot: Pilot[Any], condition: Callable[[], bool], what: str, timeout: float = 15.0
) -> None:
    """Pump the app until ``condition()`` holds, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.02)


def plain(renderable: Any) -> str:
    """A Rich renderable (a widget's content) as plain text, 200 columns wide."""
    console = Console(width=200, file=io.StringIO(), record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def demo_app(db: Database, **options: Any) -> KicksideApp:
    """The app over the demo data as the snapshots and screenshots show it."""
    return make_app(db, label="demo.sqlite3 (pinned clock)", **demo_adapter_kwargs(), **options)
