"""Queues and nodes as operators see them: counts, live nodes, pausing and resuming.

Every action runs in one transaction with its audit row (who, host, when, what) and returns the
queue after the change. Functions that depend on time take ``now``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select, update

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import ensure_aware
from kickside_engine.control.counts import read_state_counts, zero_counts
from kickside_engine.control.queries import parse_job_id, read_runs
from kickside_engine.errors import NotFoundError
from kickside_engine.models import JobState, Run
from kickside_engine.store.database import Database
from kickside_engine.store.nodes import NODE_STALE_AFTER as NODE_STALE_AFTER
from kickside_engine.store.notify import local_signal, notify_in_transaction
from kickside_engine.store.rows import run_from_row
from kickside_engine.text import known_names, validate_name


@dataclass(frozen=True)
class QueueNode:
    """A live node running a queue, with the concurrency it runs the queue at."""

    node: str
    concurrency: int


@dataclass(frozen=True)
class QueueInfo:
    """A queue as the overview shows it.

    ``no_node`` flags a queue with available jobs that no live node runs: they just wait.
    ``approximate`` names the states whose count is an estimate (see
    :mod:`kickside_engine.control.counts`).
    """

    name: str
    paused: bool
    paused_at: datetime | None
    paused_by: str | None
    counts: dict[JobState, int]
    nodes: tuple[QueueNode, ...]
    no_node: bool
    approximate: frozenset[JobState] = frozenset()

    @property
    def concurrency(self) -> int:
        """The queue's concurrency summed over its live nodes."""
        return sum(n.concurrency for n in self.nodes)


@dataclass(frozen=True)
class ExecutorKind:
    """A node's executors of one kind (``process``, ``thread`` or ``async``): how many, and
    how many of their slots run a job (``busy``) out of ``slots``."""

    kind: str
    executors: int
    busy: int
    slots: int

    def __str__(self) -> str:
        return f"{self.kind} {self.busy}/{self.slots}"


@dataclass(frozen=True)
class NodeInfo:
    """A registered worker pool; ``stale`` when its heartbeat is older than NODE_STALE_AFTER."""

    name: str
    host: str
    pid: int
    queues: dict[str, int]
    code_version: str | None
    executors_busy: int
    executors_total: int
    started_at: datetime
    heartbeat_at: datetime
    heartbeat_age: timedelta
    stale: bool
    #: The worker names the node can run, as it published them (None: not published, e.g. a
    #: pool of an older Kickside, or one whose executors have not loaded the app yet).
    workers: tuple[str, ...] | None = None
    #: The newest schema revision the node's code knows (None: not published, an older pool).
    schema_head: str | None = None
    #: Its executors by kind. A pool that did not publish them (an older Kickside) shows its
    #: ``executors_busy``/``executors_total`` as process executors of one slot each.
    executors: tuple[ExecutorKind, ...] = ()

    def serves(self, queue: str, worker: str) -> bool | None:
        """Whether this node would claim a job of ``worker`` in ``queue`` (None: unknown)."""
        if queue not in self.queues:
            return False
        if self.workers is None:
            return None
        return worker in self.workers


@dataclass(frozen=True)
class UnservedWorker:
    """Due jobs of one worker in one queue that no live node can run: they wait."""

    queue: str
    worker: str
    jobs: int
    #: The live nodes running the queue (none of which has the worker).
    nodes: tuple[str, ...]


def _node_queues(value: Any) -> dict[str, int]:
    """``{"default": 10}`` as the node registered it; a list of names counts as concurrency 0."""
    if isinstance(value, dict):
        return {
            str(name): limit if isinstance(limit, int) and not isinstance(limit, bool) else 0
            for name, limit in value.items()
        }
    if isinstance(value, list):
        return {str(name): 0 for name in value}
    return {}


def _nodes(db: Database, conn: Connection, now: datetime, *, live_only: bool) -> list[NodeInfo]:
    node = db.tables.node
    stmt = select(*(c for c in node.c if db.has_column(c))).order_by(node.c.name)
    if live_only:
        stmt = stmt.where(node.c.heartbeat_at >= now - NODE_STALE_AFTER)
    infos = []
    for r in conn.execute(stmt):
        age = max(now - r.heartbeat_at, timedelta(0))
        infos.append(
            NodeInfo(
                name=r.name,
                host=r.host,
                pid=r.pid,
                queues=_node_queues(r.queues),
                code_version=r.code_version,
                executors_busy=r.executors_busy,
                executors_total=r.executors_total,
                started_at=r.started_at,
                heartbeat_at=r.heartbeat_at,
                heartbeat_age=age,
                stale=age > NODE_STALE_AFTER,
                workers=_node_workers(r.workers),
                schema_head=r._mapping.get("schema_head"),
                executors=_executor_kinds(
                    r._mapping.get("executors"), r.executors_busy, r.executors_total
                ),
            )
        )
    return infos


def _executor_kinds(value: Any, busy: int, total: int) -> tuple[ExecutorKind, ...]:
    """The kinds a node published; without them, its executors as process executors."""
    if isinstance(value, list):
        kinds = tuple(
            ExecutorKind(
                str(entry.get("kind")),
                _count(entry.get("executors")),
                _count(entry.get("busy")),
                _count(entry.get("slots")),
            )
            for entry in value
            if isinstance(entry, dict) and isinstance(entry.get("kind"), str)
        )
        if kinds:
            return kinds
    if total <= 0:
        return ()
    return (ExecutorKind("process", total, busy, total),)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _node_workers(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(sorted(str(name) for name in value))


def live_nodes(db: Database, conn: Connection, now: datetime) -> list[NodeInfo]:
    """The nodes whose heartbeat is fresh at ``now``, through ``conn``."""
    return _nodes(db, conn, now, live_only=True)


def unserved_workers(db: Database, now: datetime) -> list[UnservedWorker]:
    """Due jobs waiting for a worker that no live node running their queue has published.

    A queue that no live node runs is left out (that is its own finding), and so is a queue
    with a node that did not publish its workers (it may have the worker).
    """
    now = ensure_aware(now, "now")
    job = db.tables.job
    with db.read() as conn:
        nodes = live_nodes(db, conn, now)
        rows = conn.execute(
            select(job.c.queue, job.c.worker, func.count())
            .where(job.c.state == JobState.AVAILABLE.value, job.c.scheduled_at <= now)
            .group_by(job.c.queue, job.c.worker)
            .order_by(job.c.queue, job.c.worker)
        ).all()
    found = []
    for queue, worker, count in rows:
        running = [n for n in nodes if queue in n.queues]
        if running and all(n.serves(queue, worker) is False for n in running):
            found.append(UnservedWorker(queue, worker, count, tuple(n.name for n in running)))
    return found


def list_nodes(db: Database, now: datetime) -> list[NodeInfo]:
    """Every registered node, by name, with its heartbeat age at ``now`` and stale flag."""
    now = ensure_aware(now, "now")
    with db.read() as conn:
        return _nodes(db, conn, now, live_only=False)


def queue_infos(
    db: Database,
    conn: Connection,
    now: datetime,
    *,
    name: str | None = None,
    exact: bool = True,
) -> list[QueueInfo]:
    """Queues (all, or only ``name``) through ``conn``, by name.

    With ``exact=False``, large counts of final states may be estimates (fast at any size).
    """
    queue = db.tables.queue
    found = read_state_counts(db, conn, name, exact=exact)
    counts = found.counts
    stmt = select(queue)
    if name is not None:
        stmt = stmt.where(queue.c.name == name)
    rows = {r.name: r for r in conn.execute(stmt)}
    running: dict[str, list[QueueNode]] = {}
    for node in _nodes(db, conn, now, live_only=True):
        for queue_name, concurrency in node.queues.items():
            running.setdefault(queue_name, []).append(QueueNode(node.name, concurrency))
    names = set(counts) | set(rows)
    if name is not None and name in running:
        names.add(name)  # asked for by name: a queue that live nodes run is a queue too
    infos = []
    for queue_name in sorted(names):
        row = rows.get(queue_name)
        queue_counts = counts.get(queue_name) or zero_counts()
        nodes = tuple(running.get(queue_name, ()))
        infos.append(
            QueueInfo(
                name=queue_name,
                paused=bool(row.paused) if row is not None else False,
                paused_at=row.paused_at if row is not None else None,
                paused_by=row.paused_by if row is not None else None,
                counts=queue_counts,
                nodes=nodes,
                no_node=queue_counts[JobState.AVAILABLE] > 0 and not nodes,
                approximate=found.approximate.get(queue_name, frozenset()),
            )
        )
    return infos


def list_queues(db: Database, now: datetime, *, exact: bool = True) -> list[QueueInfo]:
    """Every queue with a ``kickside_queue`` row or jobs, with counts and live nodes at ``now``.

    ``exact=False`` keeps it fast on a big history: large counts of completed, cancelled and
    discarded jobs are then estimates, named in :attr:`QueueInfo.approximate`.
    """
    now = ensure_aware(now, "now")
    with db.read() as conn:
        return queue_infos(db, conn, now, exact=exact)


def list_runs(db: Database, job_id: uuid.UUID | str) -> list[Run]:
    """Every execution attempt of a job, oldest first (none for an absent or malformed id)."""
    try:
        parsed = parse_job_id(job_id)
    except ValueError:
        return []
    with db.read() as conn:
        return read_runs(db, conn, parsed)


def open_runs(db: Database, job_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Run]:
    """The open (unsettled) run of each of these jobs that has one, in one query."""
    if not job_ids:
        return {}
    run = db.tables.job_run
    with db.read() as conn:
        rows = conn.execute(
            select(run).where(run.c.job_id.in_(list(job_ids)), run.c.finished_at.is_(None))
        )
        return {r.job_id: r for r in (run_from_row(row) for row in rows)}


def _unknown_queue(db: Database, conn: Connection, name: str, now: datetime) -> NotFoundError:
    known = {q.name for q in queue_infos(db, conn, now, exact=False)}
    known |= {q for n in live_nodes(db, conn, now) for q in n.queues}
    names = sorted(known)
    return NotFoundError(
        f"queue {name!r} not found: no jobs, no pause and no live node use that name "
        f"(known queues: {known_names(names)})",
        details={"queue": name, "known": names},
    )


def find_queue(db: Database, name: str, now: datetime) -> QueueInfo:
    """One queue, as :func:`list_queues` shows it, including the live nodes that run it.

    A queue is known when it has a ``kickside_queue`` row, jobs, or a live node running it;
    any other name is a :class:`NotFoundError` listing the known ones (``details["known"]``).
    """
    validate_name(name, "queue", max_length=128)
    now = ensure_aware(now, "now")
    with db.read() as conn:
        found = queue_infos(db, conn, now, name=name)
        if not found:
            raise _unknown_queue(db, conn, name, now)
    return found[0]


def _set_paused(
    db: Database, name: str, actor: Actor, now: datetime, paused: bool, create: bool
) -> QueueInfo:
    validate_name(name, "queue", max_length=128)
    now = ensure_aware(now, "now")
    queue = db.tables.queue
    values = {
        "paused": paused,
        "paused_at": now if paused else None,
        "paused_by": str(actor)[:255] if paused else None,
        "updated_at": now,
    }
    with db.begin() as conn:
        row = conn.execute(
            select(queue).where(queue.c.name == name).with_for_update()
        ).one_or_none()
        if row is None and not create and not queue_infos(db, conn, now, name=name):
            raise _unknown_queue(db, conn, name, now)  # a typo must not pause a new queue
        changed = bool(row.paused) != paused if row is not None else paused
        if row is None:
            conn.execute(
                db.upsert_insert(queue)
                .values(name=name, **values)
                .on_conflict_do_update(index_elements=["name"], set_=values)
            )
        elif changed:
            # Pausing a paused queue keeps who paused it first, and when.
            conn.execute(update(queue).where(queue.c.name == name).values(**values))
        if not paused:
            notify_in_transaction(db, conn, name)
        record_audit(
            db,
            conn,
            actor,
            "pause" if paused else "resume",
            "queue",
            name,
            {"paused": paused, "changed": changed},
            now,
        )
        (info,) = queue_infos(db, conn, now, name=name)
    if not paused:
        local_signal(db).wake(name)
    return info


def pause_queue(
    db: Database, name: str, actor: Actor, now: datetime, *, create: bool = False
) -> QueueInfo:
    """Pause a queue on every node (idempotent): nodes stop claiming, running jobs finish.

    The queue must be known (a row, jobs, or a live node running it), else
    :class:`NotFoundError` listing the known queues: a mistyped name must not pause a new,
    empty queue. ``create=True`` pauses a queue before it has any (its jobs then wait).
    """
    return _set_paused(db, name, actor, now, True, create)


def resume_queue(db: Database, name: str, actor: Actor, now: datetime) -> QueueInfo:
    """Resume a queue on every node (idempotent) and wake the pools that run it.

    An unknown queue is a :class:`NotFoundError` listing the known ones.
    """
    return _set_paused(db, name, actor, now, False, False)
