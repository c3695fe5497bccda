"""The operator API: every read and action the CLI and the dashboard use, and nothing else.

This package is the one door for operator tools: ``kickside_tui`` imports only
:mod:`kickside_engine` (its ``__all__``), this package, :mod:`kickside_engine.runtime` and
:mod:`kickside_engine.config` (a test checks). Its modules read what operators look at (jobs,
queues, nodes, slots, capacity, metrics, health, the audit trail, cron) and act on it; reads may
query the database here, writes go through :mod:`kickside_engine.store`.

Every action runs in one transaction with its audit row (who, host, when, what) and returns the
job or queue after the change. Functions that depend on time take ``now``.
"""

from __future__ import annotations

from kickside_engine.audit import ACTIONS as AUDIT_ACTIONS
from kickside_engine.audit import Actor, AuditEntry, record_audit
from kickside_engine.clock import utcnow
from kickside_engine.control.actions import (
    JobAction,
    cancel_job,
    delete_job,
    discard_job,
    resume_job,
    retry_job,
)
from kickside_engine.control.audit import AuditPage, check_audit_action, list_audit
from kickside_engine.control.bulk import (
    CONFIRM_BY_COUNT_ABOVE,
    MAX_BATCH,
    BulkPreview,
    BulkResult,
    bulk_apply,
    bulk_preview,
)
from kickside_engine.control.capacity import (
    NO_RATE,
    CapacityGroupInfo,
    Rate,
    capacity_groups,
    parse_rate,
    set_capacity,
    stops_work,
)
from kickside_engine.control.counts import state_counts
from kickside_engine.control.explain import Explanation, Reason, explain
from kickside_engine.control.health import Finding, HealthReport, doctor
from kickside_engine.control.metrics import (
    Overview,
    QueueMetrics,
    overview,
    queue_backlog,
    queue_metrics,
    throughput,
)
from kickside_engine.control.ownership import Ownership, delete_owned, foreign_rows
from kickside_engine.control.progress_view import shown_progress
from kickside_engine.control.purge_runner import PurgeOutcome, PurgeProgress, purge_until_done
from kickside_engine.control.queries import (
    JobDetail,
    JobFilter,
    JobPage,
    count_jobs,
    job_detail,
    list_jobs,
    parse_job_id,
)
from kickside_engine.control.queues import (
    NODE_STALE_AFTER,
    ExecutorKind,
    NodeInfo,
    QueueInfo,
    QueueNode,
    UnservedWorker,
    find_queue,
    list_nodes,
    list_queues,
    list_runs,
    live_nodes,
    open_runs,
    pause_queue,
    resume_queue,
    unserved_workers,
)
from kickside_engine.control.schedules import (
    CronEntryStatus,
    app_schedule,
    cron_status,
    load_schedule,
    running_schedule,
)
from kickside_engine.control.search import SCAN_LIMIT, scan_jobs
from kickside_engine.control.short_ids import resolve_job_id, short_id
from kickside_engine.control.workflows import (
    WorkflowChange,
    cancel_workflow,
    cancelable,
    retry_workflow,
    retryable,
)
from kickside_engine.ids import parse_uuid
from kickside_engine.plugins.pruner import BATCH as PRUNE_BATCH
from kickside_engine.plugins.pruner import MAX_BATCHES as PRUNE_MAX_BATCHES
from kickside_engine.plugins.pruner import prune
from kickside_engine.purge import purge_request, purge_slot, withdraw_purge
from kickside_engine.redact import (
    declared_sensitive_keys,
    redact_args,
    redact_meta,
    redact_text,
    redact_value,
)
from kickside_engine.slots import SlotInfo, enable_slot, list_slots, park_job, wake_job
from kickside_engine.store.reconnect import backoff_seconds, jittered
from kickside_engine.store.settings import get_settings, set_setting
from kickside_engine.workflow import WorkflowView, get_workflow, workflow_of

__all__ = [
    "AUDIT_ACTIONS",
    "CONFIRM_BY_COUNT_ABOVE",
    "MAX_BATCH",
    "NODE_STALE_AFTER",
    "NO_RATE",
    "PRUNE_BATCH",
    "PRUNE_MAX_BATCHES",
    "SCAN_LIMIT",
    "Actor",
    "AuditEntry",
    "AuditPage",
    "BulkPreview",
    "BulkResult",
    "CapacityGroupInfo",
    "CronEntryStatus",
    "ExecutorKind",
    "Explanation",
    "Finding",
    "HealthReport",
    "JobAction",
    "JobDetail",
    "JobFilter",
    "JobPage",
    "NodeInfo",
    "Overview",
    "Ownership",
    "PurgeOutcome",
    "PurgeProgress",
    "QueueInfo",
    "QueueMetrics",
    "QueueNode",
    "Rate",
    "Reason",
    "SlotInfo",
    "UnservedWorker",
    "WorkflowChange",
    "WorkflowView",
    "app_schedule",
    "backoff_seconds",
    "bulk_apply",
    "bulk_preview",
    "cancel_job",
    "cancel_workflow",
    "cancelable",
    "capacity_groups",
    "check_audit_action",
    "count_jobs",
    "cron_status",
    "declared_sensitive_keys",
    "delete_job",
    "delete_owned",
    "discard_job",
    "doctor",
    "enable_slot",
    "explain",
    "find_queue",
    "foreign_rows",
    "get_settings",
    "get_workflow",
    "jittered",
    "job_detail",
    "list_audit",
    "list_jobs",
    "list_nodes",
    "list_queues",
    "list_runs",
    "list_slots",
    "live_nodes",
    "load_schedule",
    "open_runs",
    "overview",
    "park_job",
    "parse_job_id",
    "parse_rate",
    "parse_uuid",
    "pause_queue",
    "prune",
    "purge_request",
    "purge_slot",
    "purge_until_done",
    "queue_backlog",
    "queue_metrics",
    "record_audit",
    "redact_args",
    "redact_meta",
    "redact_text",
    "redact_value",
    "resolve_job_id",
    "resume_job",
    "resume_queue",
    "retry_job",
    "retry_workflow",
    "retryable",
    "running_schedule",
    "scan_jobs",
    "set_capacity",
    "set_setting",
    "short_id",
    "shown_progress",
    "state_counts",
    "stops_work",
    "throughput",
    "unserved_workers",
    "utcnow",
    "wake_job",
    "withdraw_purge",
    "workflow_of",
]
