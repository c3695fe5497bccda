"""Node registration: each running pool keeps a ``kickside_node`` row fresh with heartbeats."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select

from kickside_engine.store.database import Database
from kickside_engine.store.revisions import head_revision, revision_at_least

#: A node whose last heartbeat is older than this is stale: it runs nothing any more.
NODE_STALE_AFTER = timedelta(seconds=30)


@dataclass(frozen=True)
class NodeBeat:
    """What a pool reports about itself on each heartbeat."""

    name: str
    host: str
    pid: int
    queues: dict[str, int]
    code_version: str | None
    executors_busy: int
    executors_total: int
    started_at: datetime
    #: The worker names this pool can run (None: not known yet, e.g. executors starting).
    workers: list[str] | None = None
    #: The pool's cron entries as published for operators (name, expression, timezone, next).
    schedule: list[dict[str, Any]] | None = None
    #: The executors by kind: ``{"kind", "executors", "busy", "slots"}`` each (None: unknown).
    executors: list[dict[str, Any]] | None = None


def heartbeat(db: Database, beat: NodeBeat, now: datetime) -> set[str]:
    """Upsert the node row; returns the names of paused queues (read in the same trip)."""
    table = db.tables.node
    values = {
        "name": beat.name,
        "host": beat.host,
        "pid": beat.pid,
        "queues": beat.queues,
        "code_version": beat.code_version,
        "executors_busy": beat.executors_busy,
        "executors_total": beat.executors_total,
        "started_at": beat.started_at,
        "heartbeat_at": now,
        "workers": beat.workers,
        "schedule": beat.schedule,
    }
    if db.has_column(table.c.schema_head):
        values["schema_head"] = head_revision()
    if db.has_column(table.c.executors):
        values["executors"] = beat.executors
    stmt = db.upsert_insert(table).values(**values)
    stmt = stmt.on_conflict_do_update(
        index_elements=["name"], set_={k: v for k, v in values.items() if k != "name"}
    )
    q = db.tables.queue
    with db.begin() as conn:
        conn.execute(stmt)
        paused = conn.execute(select(q.c.name).where(q.c.paused.is_(True))).scalars().all()
    return set(paused)


def deregister(db: Database, name: str) -> None:
    """Delete the node's row (on shutdown)."""
    table = db.tables.node
    with db.begin() as conn:
        conn.execute(delete(table).where(table.c.name == name))


def local_node_pids(db: Database, host: str) -> list[tuple[str, int]]:
    """(name, pid) of registered nodes on ``host``."""
    table = db.tables.node
    with db.read() as conn:
        rows = conn.execute(select(table.c.name, table.c.pid).where(table.c.host == host))
        return [(r.name, r.pid) for r in rows]


def count_live_nodes(db: Database, since: datetime) -> int:
    """How many registered nodes beat at or after ``since``."""
    table = db.tables.node
    with db.read() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(table).where(table.c.heartbeat_at >= since)
            ).scalar_one()
        )


@dataclass(frozen=True)
class NodeHead:
    """A running node and the newest schema revision its code knows (None: not published)."""

    name: str
    host: str
    pid: int
    code_version: str | None
    schema_head: str | None


def live_node_heads(db: Database, *, revision: str | None, since: datetime) -> list[NodeHead]:
    """Nodes whose heartbeat is at or after ``since``, read on a schema at ``revision``.

    Reads without the handle's schema check (``kickside migrate status`` runs on any schema),
    so a column the schema lacks is not selected.
    """
    if revision is None:
        return []
    table = db.tables.node
    head_column = table.c.schema_head
    columns = [table.c.name, table.c.host, table.c.pid, table.c.code_version]
    if revision_at_least(revision, head_column.info["since"]):
        columns.append(head_column)
    with db.read(check_schema=False) as conn:
        rows = conn.execute(
            select(*columns).where(table.c.heartbeat_at >= since).order_by(table.c.name)
        )
        return [
            NodeHead(r.name, r.host, r.pid, r.code_version, r._mapping.get("schema_head"))
            for r in rows
        ]
