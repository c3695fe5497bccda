"""Why isn't it running? Each reason a job is not executing right now, in plain words.

``explain`` reads the job, its queue, the live nodes, its concurrency key or capacity group and
its recent history, and returns every reason that holds, each with the data behind it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from kickside_engine.clock import ensure_aware
from kickside_engine.control.capacity import rate_reached, rate_usage
from kickside_engine.control.queries import parse_job_id
from kickside_engine.control.queues import NODE_STALE_AFTER, live_nodes, queue_infos
from kickside_engine.errors import NotFoundError
from kickside_engine.models import Job, JobState
from kickside_engine.purge import purge_request
from kickside_engine.store.database import Database
from kickside_engine.store.group_limits import GroupLimits, read_group_limits
from kickside_engine.store.rows import job_from_row
from kickside_engine.store.workflows import unfinished_upstreams
from kickside_engine.workflow import waiting_on, workflow_of


@dataclass(frozen=True)
class Reason:
    """One reason, with a stable ``code`` for scripts and ``data`` for the details."""

    code: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    """Everything that keeps a job from executing now (or says that it is executing)."""

    job_id: uuid.UUID
    state: JobState
    reasons: list[Reason]


def _at(value: datetime | None) -> str:
    return value.isoformat().replace("+00:00", "Z") if value else "?"


def explain(db: Database, job_id: uuid.UUID | str, *, now: datetime) -> Explanation:
    """The reasons ``job_id`` is not executing at ``now``."""
    now = ensure_aware(now, "now")
    parsed = parse_job_id(job_id)
    job_table = db.tables.job
    with db.read() as conn:
        row = conn.execute(select(job_table).where(job_table.c.id == parsed)).one_or_none()
        if row is None:
            raise NotFoundError(f"no job {parsed}")
        job = job_from_row(row)
        reasons = _reasons(db, conn, job, now)
    return Explanation(job.id, job.state, reasons)


def _reasons(db: Database, conn: Connection, job: Job, now: datetime) -> list[Reason]:
    return _purge_pending(job) + _state_reasons(db, conn, job, now)


def _purge_pending(job: Job) -> list[Reason]:
    """A slot being purged runs no more: say so first, with how to finish (or withdraw) it."""
    request = purge_request(job.meta) if job.is_slot else None
    if request is None:
        return []
    identity = f"{job.namespace}/{job.scope}/{job.identity_key}"
    waits = " once its run ends" if job.state is JobState.EXECUTING else ""
    return [
        Reason(
            "purge_pending",
            f"{request.describe()}: slot {identity} runs no more and is removed{waits} when "
            "the purge is called again (purge-slot --until-done finishes it; --withdraw "
            "keeps the slot)",
            {"requested_at": request.requested_at, "requested_by": request.requested_by},
        )
    ]


def _state_reasons(db: Database, conn: Connection, job: Job, now: datetime) -> list[Reason]:
    state = job.state
    if state is JobState.EXECUTING:
        return _executing(db, conn, job, now)
    if state.is_final:
        last = job.errors[-1].error if job.errors else None
        return [
            Reason(
                "finished",
                f"the job is {state.value} (since {_at(job.finalized_at)})"
                + (f": {last.splitlines()[0]}" if last else ""),
                {"state": state.value, "finalized_at": job.finalized_at},
            )
        ]
    if state is JobState.DISABLED:
        return [Reason("slot_disabled", "the slot is disabled: enable it to run again", {})]
    if state is JobState.WAITING:
        return _waiting(db, conn, job)
    reasons: list[Reason] = []
    if state is JobState.PARKED:
        if not (job.demand_pending or job.control_pending):
            reasons.append(
                Reason("slot_parked", "the slot is parked without demand: it runs when woken", {})
            )
        return reasons
    if state is JobState.RETRYABLE:
        last = job.errors[-1].error.splitlines()[0] if job.errors else "an error"
        reasons.append(
            Reason(
                "retry_backoff",
                f"attempt {job.attempt} failed ({last}); "
                f"retry backoff until {_at(job.scheduled_at)}",
                {"until": job.scheduled_at, "attempt": job.attempt},
            )
        )
    elif job.scheduled_at > now:
        reasons.append(
            Reason(
                "scheduled_in_future",
                f"scheduled for {_at(job.scheduled_at)}",
                {"scheduled_at": job.scheduled_at},
            )
        )
    reasons += _queue_reasons(db, conn, job, now)
    reasons += _key_reasons(db, conn, job, now)
    reasons += _unknown_worker(db, conn, job, now)
    if not reasons and state is JobState.AVAILABLE:
        ahead = conn.execute(
            select(func.count())
            .select_from(db.tables.job)
            .where(
                db.tables.job.c.state == JobState.AVAILABLE.value,
                db.tables.job.c.queue == job.queue,
                db.tables.job.c.scheduled_at <= now,
                (db.tables.job.c.priority < job.priority)
                | (
                    (db.tables.job.c.priority == job.priority)
                    & (db.tables.job.c.scheduled_at < job.scheduled_at)
                ),
            )
        ).scalar_one()
        reasons.append(
            Reason(
                "waiting_to_be_claimed",
                f"due and waiting for a free executor ({ahead} job(s) ahead in queue {job.queue})",
                {"ahead": ahead},
            )
        )
    return reasons


#: How many unfinished upstream steps a "waiting" reason names.
_UPSTREAMS_NAMED = 5


def _waiting(db: Database, conn: Connection, job: Job) -> list[Reason]:
    """A workflow job waits for its upstream jobs: how many, and the first few by name."""
    counts = waiting_on(db, conn, job.id)
    if counts is None:
        return [Reason("waiting_on_upstreams", "waiting on upstream jobs (no workflow found)")]
    pending, total = counts
    names = [
        f"{row.step} ({row.state})"
        for row in unfinished_upstreams(db, conn, job.id, _UPSTREAMS_NAMED)
    ]
    more = f", and {pending - len(names)} more" if pending > len(names) else ""
    listed = f": {', '.join(names)}{more}" if names else ""
    workflow = workflow_of(job)
    return [
        Reason(
            "waiting_on_upstreams",
            f"waiting on {pending} of {total} upstream jobs{listed}",
            {
                "pending": pending,
                "upstreams": total,
                "workflow": workflow[0] if workflow else None,
                "unfinished": names,
            },
        )
    ]


def _executing(db: Database, conn: Connection, job: Job, now: datetime) -> list[Reason]:
    node = db.tables.node
    beat = conn.execute(
        select(node.c.heartbeat_at).where(node.c.name == job.lease_owner)
    ).scalar_one_or_none()
    reasons = [
        Reason(
            "executing",
            f"executing on {job.lease_owner} since {_at(job.attempted_at)} (attempt {job.attempt})",
            {"node": job.lease_owner, "lease_expires_at": job.lease_expires_at},
        )
    ]
    if job.lease_expires_at is not None and job.lease_expires_at < now:
        reasons.append(
            Reason(
                "lease_expired",
                f"its lease expired at {_at(job.lease_expires_at)}"
                ": the Lifeline will make it available again",
                {},
            )
        )
    if beat is None or now - beat > NODE_STALE_AFTER:
        reasons.append(
            Reason(
                "lease_held_by_stale_node",
                f"the lease is held by {job.lease_owner}, whose heartbeat is "
                + ("missing" if beat is None else f"stale (last {_at(beat)})"),
                {"node": job.lease_owner, "heartbeat_at": beat},
            )
        )
    return reasons


def _queue_reasons(db: Database, conn: Connection, job: Job, now: datetime) -> list[Reason]:
    infos = queue_infos(db, conn, now, name=job.queue, exact=False)  # needs live counts only
    reasons = []
    info = infos[0] if infos else None
    if info is not None and info.paused:
        reasons.append(
            Reason(
                "queue_paused",
                f"queue {job.queue} is paused (since {_at(info.paused_at)} by {info.paused_by})",
                {"paused_at": info.paused_at, "paused_by": info.paused_by},
            )
        )
    if info is None or not info.nodes:
        reasons.append(Reason("no_live_node", f"no live node runs queue {job.queue}", {}))
    elif info.counts[JobState.EXECUTING] >= info.concurrency > 0:
        reasons.append(
            Reason(
                "executors_busy",
                f"every executor of queue {job.queue} is busy "
                f"({info.counts[JobState.EXECUTING]}/{info.concurrency})",
                {"executing": info.counts[JobState.EXECUTING], "concurrency": info.concurrency},
            )
        )
    return reasons


def _holders(db: Database, conn: Connection, *where: Any) -> list[str]:
    job = db.tables.job
    rows = conn.execute(
        select(job.c.id).where(job.c.state == JobState.EXECUTING.value, *where).limit(10)
    )
    return [str(r[0]) for r in rows]


def _key_reasons(db: Database, conn: Connection, job: Job, now: datetime) -> list[Reason]:
    t = db.tables.job
    if job.concurrency_key is None:
        return []
    if job.capacity_group is None:
        holders = _holders(db, conn, t.c.concurrency_key == job.concurrency_key)
        if holders:
            return [
                Reason(
                    "concurrency_key_busy",
                    f"concurrency key {job.concurrency_key!r} is held by {holders[0]}",
                    {"held_by": holders},
                )
            ]
        return []
    limits = read_group_limits(db, conn, job.meta.get("capacity") or {})
    if limits.problem or limits.global_limit is None or limits.per_key_limit is None:
        return [
            Reason(
                "capacity_settings_invalid",
                f"capacity group {job.capacity_group}: {limits.problem}",
                {"group": job.capacity_group, "problem": limits.problem},
            )
        ]
    group_holders = _holders(db, conn, t.c.capacity_group == job.capacity_group)
    group_count = conn.execute(
        select(func.count())
        .select_from(t)
        .where(t.c.state == JobState.EXECUTING.value, t.c.capacity_group == job.capacity_group)
    ).scalar_one()
    reasons = []
    if group_count >= limits.global_limit:
        reasons.append(
            Reason(
                "capacity_saturated",
                f"capacity group {job.capacity_group} is full "
                f"({group_count}/{limits.global_limit})",
                {"group": job.capacity_group, "held_by": group_holders},
            )
        )
    key_holders = _holders(
        db,
        conn,
        t.c.capacity_group == job.capacity_group,
        t.c.concurrency_key == job.concurrency_key,
    )
    if len(key_holders) >= limits.per_key_limit:
        reasons.append(
            Reason(
                "concurrency_key_saturated",
                f"concurrency key {job.concurrency_key!r} of group {job.capacity_group} is at its "
                f"limit ({len(key_holders)}/{limits.per_key_limit})",
                {"held_by": key_holders},
            )
        )
    return reasons + _rate_reasons(db, conn, job, limits, now)


def _rate_reasons(
    db: Database, conn: Connection, job: Job, limits: GroupLimits, now: datetime
) -> list[Reason]:
    group, key = str(job.capacity_group), str(job.concurrency_key)
    rates = rate_usage(db, conn, group, limits, now)
    reasons = []
    if limits.rate and rates.group_window and rates.group >= limits.rate.limit:
        reasons.append(
            Reason(
                "rate_limited",
                rate_reached(f"group {group}", rates.group, limits.rate, rates.group_window[1]),
                {
                    "group": group,
                    "started": rates.group,
                    "rate_limit": str(limits.rate),
                    "next_admission_at": rates.group_window[1],
                },
            )
        )
    started = rates.per_key.get(key, 0)
    if limits.per_key_rate and rates.key_window and started >= limits.per_key_rate.limit:
        reasons.append(
            Reason(
                "concurrency_key_rate_limited",
                rate_reached(f"key {key}", started, limits.per_key_rate, rates.key_window[1]),
                {
                    "group": group,
                    "concurrency_key": key,
                    "started": started,
                    "rate_limit": str(limits.per_key_rate),
                    "next_admission_at": rates.key_window[1],
                },
            )
        )
    return reasons


def _unknown_worker(db: Database, conn: Connection, job: Job, now: datetime) -> list[Reason]:
    """Whether every live node running the job's queue lacks its worker: pools never claim a
    job they cannot run (it waits, unharmed, for a pool that has the worker)."""
    running = [n for n in live_nodes(db, conn, now) if job.queue in n.queues]
    if not running or any(n.serves(job.queue, job.worker) is not False for n in running):
        return []
    described = ", ".join(
        f"{n.name} ({n.code_version})" if n.code_version else n.name for n in running[:5]
    )
    return [
        Reason(
            "unknown_worker",
            f"no running node has worker {job.worker!r} (queue {job.queue} runs on "
            f"{described}): the job waits for a pool that has it; deploy the worker or fix "
            "the name",
            {"worker": job.worker, "nodes": [n.name for n in running]},
        )
    ]
