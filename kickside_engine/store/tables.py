"""The engine's tables, as SQLAlchemy Core metadata.

The migrations in ``kickside_engine/migrations`` create exactly this schema (a test compares the
two on both backends). Tables are built per PostgreSQL schema name, so statements compiled from
them are always schema-qualified and never depend on the connection's ``search_path``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    ColumnElement,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    SmallInteger,
    String,
    Table,
    Text,
    UniqueConstraint,
    Uuid,
    false,
    literal_column,
    text,
)

from kickside_engine.models import FINAL_STATES as FINAL
from kickside_engine.models import JobState
from kickside_engine.store.types import JSONDocument, NullableJSONDocument, UTCDateTime

#: The state and final-state names the CHECK constraints allow: the enum's, in its order.
JOB_STATES = tuple(state.value for state in JobState)
FINAL_STATES = tuple(state.value for state in JobState if state in FINAL)
#: The predicate of the partial GIN index on tags (PostgreSQL): jobs that have tags.
TAGGED = "tags <> '[]'::jsonb"
JOB_KINDS = ("oneshot", "slot")
RUN_OUTCOMES = (
    "completed",
    "failed",
    "snoozed",
    "cancelled",
    "discarded",
    "timeout",
    "crashed",
    "rescued",
)

#: An auto-incrementing 64-bit key (SQLite only auto-increments INTEGER PRIMARY KEY).
BigId = BigInteger().with_variant(Integer(), "sqlite")

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


@dataclass(frozen=True)
class Tables:
    """The engine's tables in one schema."""

    metadata: MetaData
    job: Table
    job_run: Table
    queue: Table
    node: Table
    setting: Table
    recurring_execution: Table
    audit: Table
    rate_window: Table
    workflow_step: Table
    workflow_edge: Table


def _partial_index(name: str | None, *columns: Any, where: Any, unique: bool = False) -> Index:
    """An index holding only the rows ``where`` is true for, on both backends."""
    return Index(name, *columns, unique=unique, postgresql_where=where, sqlite_where=where)


def state_literal(state: str) -> ColumnElement[str]:
    """``state`` as a SQL literal, to compare ``kickside_job.state`` with.

    A partial index whose predicate names a state (``ix_kickside_job_lease``: executing jobs)
    serves only the queries that imply its predicate, and a bound parameter implies nothing in
    the generic plan PostgreSQL may adopt for a statement psycopg prepared (from its fifth run
    on a connection): such a query then reads every job instead of the few executing ones.
    """
    if state not in JOB_STATES:
        raise ValueError(f"unknown job state {state!r}")
    return literal_column(f"'{state}'", String)


@lru_cache(maxsize=16)
def build_tables(schema: str | None = None) -> Tables:
    """The engine's tables, qualified with ``schema`` (None: the connection's default)."""
    md = MetaData(schema=schema, naming_convention=NAMING_CONVENTION)

    job = Table(
        "kickside_job",
        md,
        Column("id", Uuid(), primary_key=True),
        Column("kind", String(16), nullable=False, server_default="oneshot"),
        Column("state", String(16), nullable=False),
        Column("queue", String(128), nullable=False, server_default="default"),
        Column("worker", String(255), nullable=False),
        Column("args", JSONDocument, nullable=False),
        Column("meta", JSONDocument, nullable=False),
        Column("tags", JSONDocument, nullable=False),
        Column("errors", JSONDocument, nullable=False),
        Column("attempt", Integer, nullable=False, server_default="0"),
        Column("max_attempts", Integer, nullable=False, server_default="20"),
        Column("priority", SmallInteger, nullable=False, server_default="0"),
        Column("unique_key", String(64), nullable=True),
        # Slot identity (namespace, scope, identity_key); also usable by one-shot jobs.
        Column("namespace", String(255), nullable=True),
        Column("scope", String(255), nullable=True),
        Column("identity_key", String(255), nullable=True),
        Column("concurrency_key", String(255), nullable=True),
        Column("capacity_group", String(255), nullable=True),
        # Wake demand: ordinary demand (new work) and control wakes (operator/API dispatch).
        Column("demand_pending", Boolean, nullable=False, server_default=false()),
        Column("control_pending", Boolean, nullable=False, server_default=false()),
        Column("demand_seq", BigInteger, nullable=False, server_default="0"),
        # The lease: who holds the job, with which fencing token, until when.
        Column("lease_owner", String(255), nullable=True),
        Column("lease_token", Uuid(), nullable=True),
        Column("lease_expires_at", UTCDateTime, nullable=True),
        Column("rescue_count", Integer, nullable=False, server_default="0"),
        Column("max_execution_ms", BigInteger, nullable=True),
        Column("inserted_at", UTCDateTime, nullable=False),
        Column("scheduled_at", UTCDateTime, nullable=False),
        Column("attempted_at", UTCDateTime, nullable=True),
        Column("completed_at", UTCDateTime, nullable=True),
        Column("cancelled_at", UTCDateTime, nullable=True),
        Column("discarded_at", UTCDateTime, nullable=True),
        Column("finalized_at", UTCDateTime, nullable=True),
        Column("updated_at", UTCDateTime, nullable=False),
        # What the worker returned (migration 0006); last, as ``Job.result`` is.
        Column("result", NullableJSONDocument, nullable=True),
        # What the live attempt last reported (migration 0008); last, as ``Job.progress`` is.
        Column("progress", NullableJSONDocument, nullable=True),
        CheckConstraint(_in("state", JOB_STATES), name="state"),
        CheckConstraint(_in("kind", JOB_KINDS), name="kind"),
        CheckConstraint("priority BETWEEN 0 AND 9", name="priority"),
        CheckConstraint("max_attempts >= 1", name="max_attempts"),
        CheckConstraint("attempt >= 0", name="attempt"),
        CheckConstraint(
            f"({_in('state', FINAL_STATES)}) = (finalized_at IS NOT NULL)", name="finalized"
        ),
        CheckConstraint(
            "state <> 'executing' OR (lease_owner IS NOT NULL AND lease_token IS NOT NULL"
            " AND lease_expires_at IS NOT NULL)",
            name="executing_lease",
        ),
        CheckConstraint(
            "kind <> 'slot' OR (namespace IS NOT NULL AND scope IS NOT NULL"
            " AND identity_key IS NOT NULL)",
            name="slot_identity",
        ),
        CheckConstraint("state NOT IN ('parked', 'disabled') OR kind = 'slot'", name="slot_state"),
    )
    Index(
        "ix_kickside_job_fetch",
        job.c.state,
        job.c.queue,
        job.c.priority,
        job.c.scheduled_at,
        job.c.id,
    )
    Index(None, job.c.worker, job.c.state)
    Index(None, job.c.inserted_at)
    # Partial (migration 0002): every claim and every settle rewrites a job row with a new
    # state, so each index that holds every job costs an insert per job twice over; these hold
    # only the jobs they are ever asked about. (The concurrency and capacity indexes, as full
    # ones, also lured the claim of keyless jobs away from the fetch index into reading and
    # sorting every available job.)
    _partial_index(None, job.c.finalized_at, where=job.c.finalized_at.is_not(None))
    _partial_index(
        "ix_kickside_job_lease",
        job.c.state,
        job.c.lease_expires_at,
        where=job.c.state == "executing",
    )
    _partial_index(
        "ix_kickside_job_concurrency",
        job.c.concurrency_key,
        job.c.state,
        where=job.c.concurrency_key.is_not(None),
    )
    _partial_index(
        "ix_kickside_job_capacity",
        job.c.capacity_group,
        job.c.state,
        where=job.c.capacity_group.is_not(None),
    )
    _partial_index(
        "uq_kickside_job_unique_key",
        job.c.unique_key,
        unique=True,
        where=job.c.unique_key.is_not(None),
    )
    _partial_index(
        "uq_kickside_job_identity",
        job.c.namespace,
        job.c.scope,
        job.c.identity_key,
        unique=True,
        where=job.c.identity_key.is_not(None),
    )
    # Partial (migration 0003): most jobs have no tags, and a GIN entry per row version of every
    # job cost the hot path CPU and WAL. The tag filter repeats the predicate (queries.py).
    Index(
        "ix_kickside_job_tags",
        job.c.tags,
        postgresql_using="gin",
        postgresql_where=text(TAGGED),
    ).ddl_if(dialect="postgresql")

    job_run = Table(
        "kickside_job_run",
        md,
        Column("id", BigId, primary_key=True, autoincrement=True),
        Column(
            "job_id",
            Uuid(),
            ForeignKey(job.c.id, ondelete="CASCADE"),
            nullable=False,
        ),
        Column("attempt", Integer, nullable=False),
        Column("queue", String(128), nullable=False),
        Column("worker", String(255), nullable=False),
        Column("node", String(255), nullable=False),
        Column("lease_token", Uuid(), nullable=False),
        Column("code_version", String(128), nullable=True),
        Column("queue_ms", BigInteger, nullable=True),
        Column("started_at", UTCDateTime, nullable=False),
        Column("finished_at", UTCDateTime, nullable=True),
        Column("duration_ms", BigInteger, nullable=True),
        Column("outcome", String(16), nullable=True),
        Column("error", Text, nullable=True),
        CheckConstraint(f"outcome IS NULL OR {_in('outcome', RUN_OUTCOMES)}", name="outcome"),
        CheckConstraint("(outcome IS NULL) = (finished_at IS NULL)", name="settled"),
    )
    Index(None, job_run.c.job_id, job_run.c.attempt)
    # Partial (migration 0002): open runs are looked up by lease token, never by this index.
    _partial_index(None, job_run.c.finished_at, where=job_run.c.finished_at.is_not(None))
    Index("uq_kickside_job_run_lease_token", job_run.c.lease_token, unique=True)

    queue = Table(
        "kickside_queue",
        md,
        Column("name", String(128), primary_key=True),
        Column("paused", Boolean, nullable=False, server_default=false()),
        Column("paused_at", UTCDateTime, nullable=True),
        Column("paused_by", String(255), nullable=True),
        Column("updated_at", UTCDateTime, nullable=False),
    )

    node = Table(
        "kickside_node",
        md,
        Column("name", String(255), primary_key=True),
        Column("host", String(255), nullable=False),
        Column("pid", Integer, nullable=False),
        Column("queues", JSONDocument, nullable=False),
        Column("code_version", String(128), nullable=True),
        Column("executors_busy", Integer, nullable=False, server_default="0"),
        Column("executors_total", Integer, nullable=False, server_default="0"),
        Column("started_at", UTCDateTime, nullable=False),
        Column("heartbeat_at", UTCDateTime, nullable=False),
        # Migration 0004: what the pool serves and runs (None: a pool that did not publish).
        Column("workers", JSONDocument, nullable=True),
        Column("schedule", JSONDocument, nullable=True),
        # Migration 0007: the newest revision the node's code knows. Newer than OLDEST_SCHEMA,
        # so used only where Database.has_column finds it.
        Column("schema_head", String(32), nullable=True, info={"since": "0007"}),
        # Migration 0010: the pool's executors by kind with busy and total slots (a list of
        # {"kind", "executors", "busy", "slots"}); NULL from a pool that did not publish them.
        Column("executors", NullableJSONDocument, nullable=True, info={"since": "0010"}),
    )
    Index(None, node.c.heartbeat_at)

    setting = Table(
        "kickside_setting",
        md,
        Column("namespace", String(255), nullable=False),
        Column("key", String(255), nullable=False),
        Column("value", JSONDocument, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("updated_by", String(255), nullable=True),
        PrimaryKeyConstraint("namespace", "key"),
    )

    recurring_execution = Table(
        "kickside_recurring_execution",
        md,
        Column("id", BigId, primary_key=True, autoincrement=True),
        Column("key", String(255), nullable=False),
        Column("run_at", UTCDateTime, nullable=False),
        Column("job_id", Uuid(), nullable=True),
        UniqueConstraint("key", "run_at"),
    )

    audit = Table(
        "kickside_audit",
        md,
        Column("id", BigId, primary_key=True, autoincrement=True),
        Column("at", UTCDateTime, nullable=False),
        Column("actor", String(255), nullable=False),
        Column("host", String(255), nullable=False),
        Column("action", String(64), nullable=False),
        Column("target_type", String(32), nullable=False),
        Column("target", String(512), nullable=False),
        Column("details", JSONDocument, nullable=False),
    )
    Index(None, audit.c.at)
    # Migration 0005: one job's entries, newest first (the job detail and its log).
    Index("ix_kickside_audit_target_id", audit.c.target, audit.c.id)

    # Migration 0009: starts per capacity group (key '') or concurrency key and rate window
    # (store/rate_windows.py); the Pruner deletes ended windows by their end.
    rate_window = Table(
        "kickside_rate_window",
        md,
        Column("capacity_group", String(255), nullable=False),
        Column("concurrency_key", String(255), nullable=False),
        Column("window_start", UTCDateTime, nullable=False),
        Column("window_end", UTCDateTime, nullable=False),
        Column("admitted", Integer, nullable=False),
        PrimaryKeyConstraint("capacity_group", "concurrency_key", "window_start", "window_end"),
        CheckConstraint("admitted >= 0", name="admitted"),
        CheckConstraint("window_end > window_start", name="window"),
    )
    Index(None, rate_window.c.window_end)

    # Migration 0011 (workflows, store/workflows.py): each job of a workflow, with the count of
    # its upstream jobs not final yet (the settle that takes it to 0 releases the job), and one
    # edge per dependency, resolved (the upstream's final state) exactly once. Newer than
    # OLDEST_SCHEMA: used only where Database.has_table finds them.
    workflow_step = Table(
        "kickside_workflow_step",
        md,
        Column("job_id", Uuid(), ForeignKey(job.c.id, ondelete="CASCADE"), primary_key=True),
        Column("workflow_id", String(255), nullable=False),
        Column("step", String(255), nullable=False),
        Column("upstreams", Integer, nullable=False),
        Column("upstreams_pending", Integer, nullable=False),
        CheckConstraint("upstreams_pending BETWEEN 0 AND upstreams", name="pending"),
        info={"since": "0011"},
    )
    # Unique: a workflow inserted twice (racing inserts too) is refused by its first step.
    Index(None, workflow_step.c.workflow_id, workflow_step.c.step, unique=True)
    workflow_edge = Table(
        "kickside_workflow_edge",
        md,
        Column("downstream_id", Uuid(), ForeignKey(job.c.id, ondelete="CASCADE"), nullable=False),
        Column("upstream_id", Uuid(), nullable=False),
        Column("on_failure", String(8), nullable=False),
        # The upstream's final state once it reached one (NULL: not yet).
        Column("resolved_state", String(16), nullable=True),
        PrimaryKeyConstraint("downstream_id", "upstream_id"),
        CheckConstraint("on_failure IN ('cancel', 'run')", name="on_failure"),
        info={"since": "0011"},
    )
    # Partial: a settle looks up the unresolved edges of the jobs it finalized.
    _partial_index(
        None,
        workflow_edge.c.upstream_id,
        where=workflow_edge.c.resolved_state.is_(None),
    )

    return Tables(
        metadata=md,
        job=job,
        job_run=job_run,
        queue=queue,
        node=node,
        setting=setting,
        recurring_execution=recurring_execution,
        audit=audit,
        rate_window=rate_window,
        workflow_step=workflow_step,
        workflow_edge=workflow_edge,
    )


#: Tables for the default (unqualified) schema.
TABLES = build_tables(None)
metadata = TABLES.metadata
