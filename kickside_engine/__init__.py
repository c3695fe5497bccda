"""Kickside: a durable, database-backed, leased-job engine.

The public API is what this module exports; everything else is machinery.
"""

from kickside_engine import control, migrate
from kickside_engine.api import (
    claim,
    complete,
    fail,
    get_job,
    get_job_statuses,
    get_job_statuses_tx,
    node_name,
    record,
)
from kickside_engine.backoff import Backoff
from kickside_engine.builder import JobBuilder
from kickside_engine.config import DatabaseConfig, resolve_database_config
from kickside_engine.enqueue import enqueue, enqueue_fanout, enqueue_many
from kickside_engine.errors import (
    AuthenticationError,
    ConfigurationError,
    ConflictError,
    DatabaseUnavailableError,
    InvalidArgumentError,
    KicksideError,
    MigrationError,
    NotFoundError,
    PermissionDeniedError,
)
from kickside_engine.models import (
    ClaimedJob,
    Inserted,
    Job,
    JobError,
    JobKind,
    JobState,
    Run,
    RunOutcome,
)
from kickside_engine.outcomes import Cancel, Discard, Done, Outcome, RetryAfter, Snooze
from kickside_engine.slots import (
    PurgeResult,
    SlotInfo,
    WakeKey,
    WakeMultiResult,
    WakeResult,
    disable_slot,
    enable_slot,
    list_slots,
    nudge_workers,
    park_job,
    purge_slot,
    wake_job,
    wake_multi,
)
from kickside_engine.store.database import Database, connect_database
from kickside_engine.store.listen import Subscription, listen
from kickside_engine.uniqueness import Unique
from kickside_engine.workers import CapacityDeclaration, WorkerRegistry, WorkerSpec

__all__ = [
    "AuthenticationError",
    "Backoff",
    "Cancel",
    "CapacityDeclaration",
    "ClaimedJob",
    "ConfigurationError",
    "ConflictError",
    "Database",
    "DatabaseConfig",
    "DatabaseUnavailableError",
    "Discard",
    "Done",
    "Inserted",
    "InvalidArgumentError",
    "Job",
    "JobBuilder",
    "JobError",
    "JobKind",
    "JobState",
    "KicksideError",
    "MigrationError",
    "NotFoundError",
    "Outcome",
    "PermissionDeniedError",
    "PurgeResult",
    "RetryAfter",
    "Run",
    "RunOutcome",
    "SlotInfo",
    "Snooze",
    "Subscription",
    "Unique",
    "WakeKey",
    "WakeMultiResult",
    "WakeResult",
    "WorkerRegistry",
    "WorkerSpec",
    "claim",
    "complete",
    "connect_database",
    "control",
    "disable_slot",
    "enable_slot",
    "enqueue",
    "enqueue_fanout",
    "enqueue_many",
    "fail",
    "get_job",
    "get_job_statuses",
    "get_job_statuses_tx",
    "list_slots",
    "listen",
    "migrate",
    "node_name",
    "nudge_workers",
    "park_job",
    "purge_slot",
    "record",
    "resolve_database_config",
    "wake_job",
    "wake_multi",
]
