"""Whose rows a database holds: for a tool that may write only into a database of its own.

A tool that fills a database with data of its own (``kickside demo``) names everything it
writes after an :class:`Ownership`: its queues, workers, settings namespaces and cron keys.
:func:`foreign_rows` finds what does not go by those names (an application's jobs, queues,
settings, nodes, cron runs, audit entries, or tables that are not Kickside's at all) without
writing anything, and :func:`delete_owned` deletes exactly the rows :func:`foreign_rows` does
not report, so it never deletes another's row even when one arrived since the check.

Audit entries name their target: one about a queue or a settings namespace is judged by that
name; one about a job, a bulk action or the pools is left to the caller (the job it names may
be gone), counted in :attr:`Inventory.other_audit_entries`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, Connection, and_, delete, func, inspect, not_, or_, select

from kickside_engine.migrate import VERSION_TABLE
from kickside_engine.store.database import Database
from kickside_engine.store.revisions import COMPATIBILITY_NAMESPACE
from kickside_engine.store.tables import Tables

#: Examples of foreign names given per kind of row.
EXAMPLES = 3
_ONE = {
    "tables": "table",
    "jobs": "job",
    "queues": "queue",
    "settings": "setting",
    "nodes": "node",
    "cron runs": "cron run",
    "audit entries": "audit entry",
}


#: Settings Kickside keeps for itself (the migrations' compatibility record): no tool's and
#: no application's, never reported as foreign and never deleted with an owner's rows.
KICKSIDE_NAMESPACES = frozenset({COMPATIBILITY_NAMESPACE})


@dataclass(frozen=True)
class Ownership:
    """The names everything a tool writes goes by."""

    queues: frozenset[str]
    workers: frozenset[str]
    setting_namespaces: frozenset[str]
    cron_keys: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ForeignRows:
    """Rows of one kind (``"jobs"``, ``"queues"``, ...) that do not go by the owned names."""

    kind: str
    count: int
    #: A few of their names, the most frequent first (``deliver_receipt in billing``).
    examples: tuple[str, ...]
    #: How many different names there are.
    names: int

    def describe(self) -> str:
        """``3 jobs (deliver_receipt in billing, ...)``: one phrase for a one-line message."""
        more = ", ..." if self.names > len(self.examples) else ""
        kind = _ONE.get(self.kind, self.kind) if self.count == 1 else self.kind
        return f"{self.count} {kind} ({', '.join(self.examples)}{more})"


@dataclass(frozen=True)
class Inventory:
    """What :func:`foreign_rows` found."""

    foreign: list[ForeignRows] = field(default_factory=list)
    #: Whether Kickside's tables exist (False: nothing of Kickside's, never migrated).
    migrated: bool = False
    #: Audit entries about jobs, bulk actions or pools (not judged by name).
    other_audit_entries: int = 0


def _owned_job(t: Tables, owned: Ownership) -> ColumnElement[bool]:
    return and_(t.job.c.queue.in_(owned.queues), t.job.c.worker.in_(owned.workers))


def _foreign_audit(t: Tables, owned: Ownership) -> ColumnElement[bool]:
    audit = t.audit.c
    return or_(
        and_(audit.target_type == "queue", audit.target.not_in(owned.queues)),
        and_(audit.target_type == "settings", audit.target.not_in(owned.setting_namespaces)),
    )


def _judged_audit(t: Tables) -> ColumnElement[bool]:
    return t.audit.c.target_type.in_(("queue", "settings"))


def _foreign_nodes(conn: Connection, t: Tables, owned: Ownership) -> dict[str, list[str]]:
    """Nodes (by name) that serve a queue outside the owned names, with their queues.

    A node is judged by its queues, which every revision records (not by its workers, which
    only revision 0004 does): a pool that serves only owned queues runs only owned work.
    """
    found = {}
    for row in conn.execute(select(t.node.c.name, t.node.c.queues)):
        queues = sorted(row.queues or {})
        if not set(queues) <= owned.queues:
            found[row.name] = queues
    return found


def _examples(kind: str, counted: Iterable[tuple[str, int]]) -> ForeignRows | None:
    counts: Counter[str] = Counter()
    for name, count in counted:
        counts[name] += count
    if not counts:
        return None
    top = tuple(name for name, _ in counts.most_common(EXAMPLES))
    return ForeignRows(kind, sum(counts.values()), top, len(counts))


def _kickside_tables(t: Tables) -> set[str]:
    return {table.name for table in t.metadata.sorted_tables} | {VERSION_TABLE}


def foreign_rows(db: Database, owned: Ownership) -> Inventory:
    """Everything in ``db`` that does not go by ``owned``'s names (nothing is written).

    Tables that are not Kickside's in the database (or its schema) count as foreign: they are
    an application's. The read selects only columns every migration revision has, so a
    database at an older revision can be judged before it is upgraded.
    """
    t = db.tables
    with db.read(check_schema=False) as conn:  # judged before it is migrated, at any revision
        present = set(inspect(conn).get_table_names(schema=db.schema))
        kickside = _kickside_tables(t)
        found = [
            f
            for f in (_examples("tables", ((name, 1) for name in sorted(present - kickside))),)
            if f
        ]
        if t.job.name not in present:
            return Inventory(found, migrated=False)
        job, queue, setting = t.job.c, t.queue.c, t.setting.c
        jobs = conn.execute(
            select(job.worker, job.queue, func.count())
            .where(not_(_owned_job(t, owned)))
            .group_by(job.worker, job.queue)
        )
        queues = conn.execute(select(queue.name).where(queue.name.not_in(owned.queues)))
        settings = conn.execute(
            select(setting.namespace, func.count())
            .where(setting.namespace.not_in(owned.setting_namespaces | KICKSIDE_NAMESPACES))
            .group_by(setting.namespace)
        )
        rec = t.recurring_execution.c
        cron = conn.execute(
            select(rec.key, func.count()).where(rec.key.not_in(owned.cron_keys)).group_by(rec.key)
        )
        audit = t.audit.c
        judged = conn.execute(
            select(audit.target_type, audit.target, func.count())
            .where(_foreign_audit(t, owned))
            .group_by(audit.target_type, audit.target)
        )
        nodes = _foreign_nodes(conn, t, owned)
        other_audit = conn.execute(
            select(func.count()).select_from(t.audit).where(not_(_judged_audit(t)))
        ).scalar_one()
        for kind, counted in (
            ("jobs", ((f"{r[0]} in {r[1]}", r[2]) for r in jobs)),
            ("queues", ((name, 1) for name in queues.scalars())),
            ("settings", ((r[0], r[1]) for r in settings)),
            ("nodes", ((f"{name} serving {', '.join(q)}", 1) for name, q in nodes.items())),
            ("cron runs", ((r[0], r[1]) for r in cron)),
            ("audit entries", ((f"{r[0]} {r[1]}", r[2]) for r in judged)),
        ):
            if (rows := _examples(kind, counted)) is not None:
                found.append(rows)
    return Inventory(found, migrated=True, other_audit_entries=int(other_audit))


def delete_owned(db: Database, owned: Ownership) -> dict[str, int]:
    """Delete every row that goes by ``owned``'s names, in one transaction; counts per kind.

    Rows :func:`foreign_rows` would report are kept, whenever they arrived. Audit entries about
    jobs, bulk actions or pools are deleted with the owned rows: call this only on a database
    the caller judged its own.
    """
    t = db.tables
    owned_jobs = select(t.job.c.id).where(_owned_job(t, owned))
    with db.begin() as conn:
        foreign_nodes = set(_foreign_nodes(conn, t, owned))
        statements = {
            "runs": delete(t.job_run).where(t.job_run.c.job_id.in_(owned_jobs)),
            "jobs": delete(t.job).where(_owned_job(t, owned)),
            "queues": delete(t.queue).where(t.queue.c.name.in_(owned.queues)),
            "settings": delete(t.setting).where(
                t.setting.c.namespace.in_(owned.setting_namespaces)
            ),
            "nodes": delete(t.node).where(t.node.c.name.not_in(foreign_nodes)),
            "cron runs": delete(t.recurring_execution).where(
                t.recurring_execution.c.key.in_(owned.cron_keys)
            ),
            "audit entries": delete(t.audit).where(not_(_foreign_audit(t, owned))),
        }
        return {kind: conn.execute(stmt).rowcount for kind, stmt in statements.items()}
