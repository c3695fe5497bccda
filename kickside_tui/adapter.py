"""The dashboard's one door to the engine: a read method per view and a method per action.

Screens never import the engine's modules for data; they call an :class:`Adapter` from worker
threads and render the dataclasses it returns. A rendering test can hand the app a subclass
with canned answers. Every read takes ``now`` (from :attr:`Adapter.clock`, which tests pin), and
every action runs as :attr:`Adapter.actor` and leaves an audit row. A read-only adapter refuses
every action with :class:`~kickside_engine.errors.ReadOnlyError` (imported here from the engine,
where it lives; ``kickside_tui.adapter.ReadOnlyError`` still names it) before it reaches the
database.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kickside_engine import (
    Database,
    Job,
    JobState,
    KicksideError,
    NotFoundError,
    Recurring,
    Subscription,
    listen,
    migrate,
)
from kickside_engine import ReadOnlyError as ReadOnlyError  # its old home re-exports it
from kickside_engine.control import (
    SCAN_LIMIT,
    Actor,
    AuditEntry,
    BulkPreview,
    BulkResult,
    CapacityGroupInfo,
    CronEntryStatus,
    Explanation,
    HealthReport,
    JobDetail,
    JobFilter,
    JobPage,
    NodeInfo,
    Overview,
    PurgeOutcome,
    PurgeProgress,
    QueueInfo,
    QueueMetrics,
    SlotInfo,
    WorkflowView,
    bulk_apply,
    bulk_preview,
    cancel_job,
    capacity_groups,
    count_jobs,
    cron_status,
    discard_job,
    doctor,
    explain,
    get_workflow,
    job_detail,
    list_audit,
    list_jobs,
    list_nodes,
    list_queues,
    list_slots,
    open_runs,
    overview,
    park_job,
    pause_queue,
    purge_until_done,
    queue_metrics,
    resume_job,
    resume_queue,
    retry_job,
    running_schedule,
    scan_jobs,
    throughput,
    utcnow,
    wake_job,
    workflow_of,
)
from kickside_tui.demo.marker import filled_by_demo

#: How far back the Metrics view's plots reach, one bucket a minute.
SPARK_WINDOW = timedelta(minutes=30)
SPARK_BUCKET = timedelta(minutes=1)
#: The Overview's rates per second: buckets of five seconds over the last four minutes (48
#: bars fit an 80-column terminal; single seconds would show mostly noise and empty bars).
RATE_WINDOW = timedelta(minutes=4)
RATE_BUCKET = timedelta(seconds=5)
#: Executing jobs shown on the Leases view (each costs one run-history read).
MAX_LEASES = 100
#: Seconds between purge calls while a purge waits for a lease or history to settle.
PURGE_POLL_SECONDS = 1.0
#: Operator actions shown in a job's log (the newest).
JOB_AUDIT_LIMIT = 20
#: The Jobs view counts matches up to this many (a count of millions costs a scan).
COUNT_LIMIT = 100_000


@dataclass(frozen=True)
class QueueRow:
    """One queue on the Overview: counts by state, paused, and live concurrency.

    ``approximate`` names the states whose count is an estimate (large history on PostgreSQL).
    """

    name: str
    counts: dict[JobState, int]
    paused: bool
    concurrency: int
    has_node: bool
    no_node: bool
    approximate: frozenset[JobState] = frozenset()


@dataclass(frozen=True)
class OverviewData:
    """The Overview view: queues, throughput, nodes, and what needs attention.

    ``completed_per_second`` and ``failed_per_second`` are rates over every queue, one per
    :data:`RATE_BUCKET` of the last :data:`RATE_WINDOW`, oldest first (the last one is the
    bucket in progress).
    """

    at: datetime
    queues: list[QueueRow]
    summary: Overview
    completed_per_second: list[float]
    failed_per_second: list[float]
    near_limit: list[CapacityGroupInfo]
    waiting_on_admission: int


@dataclass(frozen=True)
class JobsData:
    """One page of the Jobs view.

    ``total`` is None when the count was not asked for (and for a search, which is never
    counted); a count that reached :data:`COUNT_LIMIT` is ``COUNT_LIMIT + 1`` (shown ``+``).
    A search reads the table in windows: ``windows`` says how many, and ``scanned_to`` is
    the insert time it had searched back to when it was stopped before the page was full.
    """

    page: JobPage
    total: int | None
    windows: int = 0
    scanned_to: datetime | None = None

    @property
    def total_capped(self) -> bool:
        """Whether the count stopped at :data:`COUNT_LIMIT`."""
        return self.total is not None and self.total > COUNT_LIMIT


@dataclass(frozen=True)
class JobDetailData:
    """A job with its run history, the reasons it is not running, and the operator actions on
    it (newest :data:`JOB_AUDIT_LIMIT` audit rows; bulk actions are audited under their filter).
    """

    detail: JobDetail
    explanation: Explanation | None
    audit: list[AuditEntry] = field(default_factory=list)
    #: The workflow the job belongs to, every step with its state (None: no workflow).
    workflow: WorkflowView | None = None


@dataclass(frozen=True)
class LeaseInfo:
    """An executing job's lease, as the Leases view shows it."""

    job: Job
    node: str | None
    expires_in: timedelta | None
    heartbeat_age: timedelta | None
    elapsed: timedelta | None
    max_execution: timedelta | None
    code_version: str | None


@dataclass(frozen=True)
class MetricsData:
    """The Metrics & health view's refresh (the doctor runs apart: :meth:`Adapter.health`)."""

    queues: list[QueueMetrics]
    audit: list[AuditEntry]


@dataclass(frozen=True)
class OpsData:
    """The Queues / nodes / cron view."""

    queues: list[QueueInfo]
    nodes: list[NodeInfo]
    cron: list[CronEntryStatus]
    #: The entries are a schedule the dashboard was given (``--schedule``).
    schedule_loaded: bool
    #: The entries are the demo's schedule, found because ``kickside demo`` filled the database.
    demo_schedule: bool = False
    #: The entries are what the running nodes publish (no schedule given).
    published: bool = False


@dataclass
class Adapter:
    """The engine's public read/action API, shaped for the dashboard's views."""

    db: Database
    read_only: bool = False
    clock: Callable[[], datetime] = utcnow
    actor: Actor = field(default_factory=Actor.current)
    #: The cron schedule to show (``--schedule``); without it, what the running nodes publish.
    schedule: Sequence[Recurring] = ()
    #: With no ``schedule`` and no running node publishing one, show the demo's when
    #: ``kickside demo`` filled the database (``kickside-tui`` without ``--schedule``); the check
    #: runs at each read, so a demo started after the dashboard is still found.
    demo_schedule: bool = False
    #: Shown in the header instead of the database URL when set (screenshots use it).
    label: str | None = None
    #: Jobs one search query reads (a window); a search runs window after window.
    search_window: int = SCAN_LIMIT

    def now(self) -> datetime:
        """The dashboard's current time (tests pin it)."""
        return self.clock()

    def describe(self) -> str:
        """Where the dashboard looks: the database URL (password masked) and schema."""
        if self.label is not None:
            return self.label
        where = self.db.display_url()
        return f"{where} schema={self.db.schema}" if self.db.schema else where

    def listen(self, callback: Callable[[str], None]) -> Subscription:
        """Call ``callback(payload)`` (on another thread) when a change commits; stop it after."""
        return listen(self.db, callback)

    def schema_problem(self) -> str | None:
        """Why the schema cannot be read (not migrated, too old), or None when it is current."""
        try:
            migrate.ensure_current(self.db)
        except KicksideError as exc:
            return str(exc)
        return None

    # --- reads ---------------------------------------------------------------------------

    def overview(self, now: datetime) -> OverviewData:
        """Queues with counts, the last minutes' throughput per second, nodes and stuck work."""
        summary = overview(self.db, now, exact=False)
        live = [n for n in list_nodes(self.db, now) if not n.stale]
        queues = [
            QueueRow(
                name=name,
                counts=counts,
                paused=name in summary.paused_queues,
                concurrency=sum(n.queues.get(name, 0) for n in live),
                has_node=any(name in n.queues for n in live),
                no_node=name in summary.queues_without_node,
                approximate=summary.approximate.get(name, frozenset()),
            )
            for name, counts in sorted(summary.counts.items())
        ]
        per_queue = throughput(self.db, now, window=RATE_WINDOW, bucket=RATE_BUCKET)
        width = int(RATE_WINDOW / RATE_BUCKET)
        seconds = RATE_BUCKET.total_seconds()
        completed = [0.0] * width
        failed = [0.0] * width
        for buckets in per_queue.values():
            for i, bucket in enumerate(buckets[-width:]):
                completed[i] += bucket.completed / seconds
                failed[i] += bucket.failed / seconds
        groups = capacity_groups(self.db, now)
        waiting = sum(
            1 for g in groups for w in g.waiting_jobs if not w.reason.startswith("eligible")
        )
        return OverviewData(
            at=now,
            queues=queues,
            summary=summary,
            completed_per_second=completed,
            failed_per_second=failed,
            near_limit=[g for g in groups if g.near_limit],
            waiting_on_admission=waiting,
        )

    def jobs(
        self, flt: JobFilter, *, cursor: str | None = None, limit: int = 50, with_total: bool
    ) -> JobsData:
        """One keyset page of the jobs matching ``flt``, newest first, and their count."""
        page = list_jobs(self.db, flt, limit=limit, cursor=cursor)
        total = count_jobs(self.db, flt, limit=COUNT_LIMIT + 1) if with_total else None
        return JobsData(page, total)

    def search(
        self,
        flt: JobFilter,
        *,
        cursor: str | None = None,
        limit: int = 50,
        on_progress: Callable[[int, datetime | None], None] | None = None,
        stop: Callable[[], bool] = lambda: False,
    ) -> JobsData:
        """A page of a free-text search, read in bounded windows until it is full.

        Each window is one short query (:func:`~kickside_engine.control.search.scan_jobs`); between
        windows ``on_progress(found, scanned_to)`` reports the matches so far, and ``stop()``
        returning True ends the search early (the page then continues where it stopped).
        """
        found: list[Job] = []
        windows = 0
        while True:
            page = scan_jobs(
                self.db,
                flt,
                limit=limit - len(found),
                cursor=cursor,
                scan_limit=self.search_window,
            )
            windows += 1
            found += page.jobs
            if page.complete or page.next_cursor is None:
                return JobsData(JobPage(found, page.next_cursor), None, windows)
            cursor = page.next_cursor
            if stop():
                return JobsData(JobPage(found, cursor), None, windows, page.scanned_to)
            if on_progress is not None:
                on_progress(len(found), page.scanned_to)

    def job(self, job_id: uuid.UUID, now: datetime) -> JobDetailData:
        """A job's detail, retry history, the engine's explanation of why it is not running,
        and the operator actions on it (its log: :mod:`kickside_tui.widgets.job_log`)."""
        detail = job_detail(self.db, job_id)
        audit = list_audit(self.db, target=str(job_id), limit=JOB_AUDIT_LIMIT).entries
        workflow = None
        if (membership := workflow_of(detail.job)) is not None:
            with contextlib.suppress(NotFoundError):  # pruned since the job was read
                workflow = get_workflow(self.db, membership[0])
        return JobDetailData(detail, explain(self.db, job_id, now=now), audit, workflow)

    def slots(self, now: datetime) -> list[SlotInfo]:
        """Slot jobs by identity, with their state, pending wakes and last run."""
        return list_slots(self.db, now=now, limit=500)

    def leases(self, now: datetime) -> list[LeaseInfo]:
        """Executing jobs, soonest lease expiry first, with node heartbeat and code version."""
        page = list_jobs(self.db, JobFilter(states=(JobState.EXECUTING,)), limit=MAX_LEASES)
        nodes = {n.name: n for n in list_nodes(self.db, now)}
        leases = []
        running = open_runs(self.db, [job.id for job in page.jobs])
        for job in page.jobs:
            open_run = running.get(job.id)
            node = nodes.get(job.lease_owner or "")
            leases.append(
                LeaseInfo(
                    job=job,
                    node=job.lease_owner,
                    expires_in=job.lease_expires_at - now if job.lease_expires_at else None,
                    heartbeat_age=node.heartbeat_age if node is not None else None,
                    elapsed=now - job.attempted_at if job.attempted_at else None,
                    max_execution=(
                        timedelta(milliseconds=job.max_execution_ms)
                        if job.max_execution_ms
                        else None
                    ),
                    code_version=open_run.code_version if open_run is not None else None,
                )
            )
        far = timedelta.max
        leases.sort(key=lambda lease: lease.expires_in if lease.expires_in is not None else far)
        return leases

    def capacity(self, now: datetime) -> list[CapacityGroupInfo]:
        """Capacity groups with limits, usage and the jobs refused admission."""
        return capacity_groups(self.db, now)

    def metrics(self, now: datetime) -> MetricsData:
        """Per queue, a minute at a time over the last half hour: throughput, p50/p95 queue and
        run times, and backlog age (:class:`~kickside_engine.control.metrics.MetricBucket`); and the
        audit trail."""
        per_queue = queue_metrics(self.db, now, window=SPARK_WINDOW, bucket=SPARK_BUCKET)
        audit = list_audit(self.db, limit=50).entries
        return MetricsData(per_queue, audit)

    def health(self, now: datetime) -> HealthReport:
        """The doctor's findings (it checks the whole database: seconds at millions of jobs)."""
        return doctor(self.db, now)

    def ops(self, now: datetime) -> OpsData:
        """Queues, nodes and the cron schedule's last and next runs.

        The schedule is the one given, else what the running nodes publish, else (over a
        database ``kickside demo`` filled) the demo's.
        """
        queues, nodes = list_queues(self.db, now, exact=False), list_nodes(self.db, now)
        if self.schedule:
            return OpsData(queues, nodes, cron_status(self.db, self.schedule, now), True)
        published = running_schedule(self.db, now)
        if not published and self.demo_schedule and filled_by_demo(self.db):
            from kickside_tui.demo.workload import SCHEDULE  # the demo's workers load only here

            return OpsData(queues, nodes, cron_status(self.db, SCHEDULE, now), False, True)
        return OpsData(queues, nodes, published, False, published=bool(published))

    def preview(
        self,
        action: str,
        flt: JobFilter,
        *,
        all_jobs: bool = False,
        include_completed: bool = False,
    ) -> BulkPreview:
        """The jobs a bulk ``action`` over ``flt`` would change (nothing is written); pass the
        preview to :meth:`bulk`, which acts on these jobs only."""
        return bulk_preview(
            self.db,
            action,
            flt,
            all_jobs=all_jobs,
            include_completed=include_completed,
            sample=5,
            now=self.now(),
        )

    # --- actions -------------------------------------------------------------------------

    def _check_writable(self, action: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"read-only dashboard: {action} is disabled")

    def retry(self, job_id: uuid.UUID, now: datetime) -> Job:
        """Retry / run now."""
        self._check_writable("retry")
        return retry_job(self.db, job_id, self.actor, now)

    def cancel(self, job_id: uuid.UUID, now: datetime) -> Job:
        """Cancel a job that is not final (an executing one is aborted on its node)."""
        self._check_writable("cancel")
        return cancel_job(self.db, job_id, self.actor, now)

    def discard(self, job_id: uuid.UUID, now: datetime) -> Job:
        """Discard a job that is not final."""
        self._check_writable("discard")
        return discard_job(self.db, job_id, self.actor, now)

    def wake(self, job_id: uuid.UUID, now: datetime) -> str:
        """A control wake with ``ensure_due``: dispatch without rescheduling a due job."""
        self._check_writable("wake")
        result = wake_job(self.db, job_id, ensure_due=True, now=now, actor=self.actor)
        if result.already_due:
            return f"job {job_id} is already due ({result.state.value}); pools nudged"
        return f"woke job {job_id}: now {result.state.value}"

    def park(self, job_id: uuid.UUID, now: datetime) -> Job:
        """Park a slot: it rests until the next wake (pending wakes are cleared)."""
        self._check_writable("park")
        return park_job(self.db, job_id, now=now, actor=self.actor)

    def enable(self, job_id: uuid.UUID, now: datetime) -> Job:
        """Resume a disabled slot: due now when a wake is pending, else parked.

        Audited as ``resume`` (via enable), as ``kickside resume`` records it; a slot that is
        no longer disabled is a conflict, never resumed some other way."""
        self._check_writable("resume")
        return resume_job(self.db, job_id, self.actor, now, expected_state=JobState.DISABLED)

    def purge(
        self,
        slot: SlotInfo,
        *,
        wait: Callable[[float], bool],
        on_progress: Callable[[PurgeProgress], None],
    ) -> PurgeOutcome:
        """Purge a slot to its end (``wait(seconds)`` returns True to stop): one audit row
        for the whole purge, with its outcome. The slot's wakes are cleared at the first
        call, so it runs no more."""
        self._check_writable("purge")
        return purge_until_done(
            self.db,
            namespace=slot.namespace,
            scope=slot.scope,
            key=slot.key,
            actor=self.actor,
            wait=wait,
            poll_seconds=PURGE_POLL_SECONDS,
            clock=self.now,
            on_progress=on_progress,
        )

    def pause_queue(self, name: str, now: datetime) -> QueueInfo:
        """Pause a queue on every node."""
        self._check_writable("pause")
        return pause_queue(self.db, name, self.actor, now)

    def resume_queue(self, name: str, now: datetime) -> QueueInfo:
        """Resume a paused queue."""
        self._check_writable("resume")
        return resume_queue(self.db, name, self.actor, now)

    def bulk(
        self,
        preview: BulkPreview,
        now: datetime,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> BulkResult:
        """Apply a previewed bulk retry, cancel or discard to the previewed jobs, in audited
        batches."""
        self._check_writable(f"bulk {preview.action}")
        return bulk_apply(self.db, preview, self.actor, now, on_progress=on_progress)
