"""Kickside: a durable, database-backed, leased-job engine.

The public API is what this module exports; everything else is machinery. Nothing is loaded
until it is used (PEP 562): ``import kickside_engine`` imports neither SQLAlchemy nor Alembic
nor the operator API, and the first use of a name (``kickside_engine.enqueue``, ``from
kickside_engine import migrate``) imports the module that defines it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from kickside_engine.async_api import (
        cancel_job_async,
        delete_job_async,
        disable_slot_async,
        discard_job_async,
        enable_slot_async,
        get_job_async,
        get_job_statuses_async,
        get_job_statuses_tx_async,
        nudge_workers_async,
        park_job_async,
        purge_slot_async,
        resume_job_async,
        retry_job_async,
        wait_for_async,
        wake_job_async,
        wake_multi_async,
    )
    from kickside_engine.async_enqueue import (
        enqueue_async,
        enqueue_fanout_async,
        enqueue_many_async,
    )
    from kickside_engine.backoff import Backoff
    from kickside_engine.builder import JobBuilder
    from kickside_engine.config import DatabaseConfig, resolve_database_config
    from kickside_engine.enqueue import enqueue, enqueue_fanout, enqueue_many
    from kickside_engine.errors import (
        ArgsDecodeError,
        AuthenticationError,
        ConfigurationError,
        ConflictError,
        DatabaseUnavailableError,
        InvalidArgumentError,
        KicksideError,
        MigrationError,
        NotFoundError,
        PermissionDeniedError,
        ReadOnlyError,
        WaitTimeoutError,
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
    from kickside_engine.outcomes import (
        MAX_RESULT_BYTES,
        Cancel,
        Discard,
        Done,
        Outcome,
        ResultNotStorableError,
        RetryAfter,
        Snooze,
    )
    from kickside_engine.plugins.cron import Recurring
    from kickside_engine.progress import (
        MAX_PROGRESS_BYTES,
        NotRunningError,
        ProgressNotStorableError,
    )
    from kickside_engine.runtime.async_pool import AsyncWorkerPool
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
    from kickside_engine.store.async_database import AsyncDatabase, connect_async_database
    from kickside_engine.store.database import Database, connect_database
    from kickside_engine.store.listen import Subscription, listen
    from kickside_engine.typed_args import ArgsAdapter
    from kickside_engine.uniqueness import Unique
    from kickside_engine.waiting import JobResult, wait_for
    from kickside_engine.workers import CapacityDeclaration, WorkerRegistry, WorkerSpec
    from kickside_engine.workflow import (
        After,
        Upstream,
        Workflow,
        WorkflowInserted,
        WorkflowStep,
        WorkflowView,
        batch,
        get_workflow,
        upstream_results,
        upstream_results_async,
    )

#: The modules exported as they are (``kickside_engine.migrate.upgrade(db)``).
_SUBMODULES = frozenset({"control", "migrate"})

#: Where each other public name is defined.
_EXPORTS: dict[str, str] = {
    "claim": "kickside_engine.api",
    "complete": "kickside_engine.api",
    "fail": "kickside_engine.api",
    "get_job": "kickside_engine.api",
    "get_job_statuses": "kickside_engine.api",
    "get_job_statuses_tx": "kickside_engine.api",
    "node_name": "kickside_engine.api",
    "record": "kickside_engine.api",
    "cancel_job_async": "kickside_engine.async_api",
    "discard_job_async": "kickside_engine.async_api",
    "delete_job_async": "kickside_engine.async_api",
    "disable_slot_async": "kickside_engine.async_api",
    "enable_slot_async": "kickside_engine.async_api",
    "park_job_async": "kickside_engine.async_api",
    "purge_slot_async": "kickside_engine.async_api",
    "resume_job_async": "kickside_engine.async_api",
    "enqueue_async": "kickside_engine.async_enqueue",
    "enqueue_fanout_async": "kickside_engine.async_enqueue",
    "enqueue_many_async": "kickside_engine.async_enqueue",
    "get_job_async": "kickside_engine.async_api",
    "get_job_statuses_async": "kickside_engine.async_api",
    "get_job_statuses_tx_async": "kickside_engine.async_api",
    "nudge_workers_async": "kickside_engine.async_api",
    "retry_job_async": "kickside_engine.async_api",
    "wait_for_async": "kickside_engine.async_api",
    "wake_job_async": "kickside_engine.async_api",
    "wake_multi_async": "kickside_engine.async_api",
    "AsyncWorkerPool": "kickside_engine.runtime.async_pool",
    "AsyncDatabase": "kickside_engine.store.async_database",
    "connect_async_database": "kickside_engine.store.async_database",
    "Backoff": "kickside_engine.backoff",
    "JobBuilder": "kickside_engine.builder",
    "DatabaseConfig": "kickside_engine.config",
    "resolve_database_config": "kickside_engine.config",
    "enqueue": "kickside_engine.enqueue",
    "enqueue_fanout": "kickside_engine.enqueue",
    "enqueue_many": "kickside_engine.enqueue",
    "ArgsDecodeError": "kickside_engine.errors",
    "AuthenticationError": "kickside_engine.errors",
    "ConfigurationError": "kickside_engine.errors",
    "ConflictError": "kickside_engine.errors",
    "DatabaseUnavailableError": "kickside_engine.errors",
    "InvalidArgumentError": "kickside_engine.errors",
    "KicksideError": "kickside_engine.errors",
    "MigrationError": "kickside_engine.errors",
    "NotFoundError": "kickside_engine.errors",
    "PermissionDeniedError": "kickside_engine.errors",
    "ReadOnlyError": "kickside_engine.errors",
    "WaitTimeoutError": "kickside_engine.errors",
    "ClaimedJob": "kickside_engine.models",
    "Inserted": "kickside_engine.models",
    "Job": "kickside_engine.models",
    "JobError": "kickside_engine.models",
    "JobKind": "kickside_engine.models",
    "JobState": "kickside_engine.models",
    "Run": "kickside_engine.models",
    "RunOutcome": "kickside_engine.models",
    "Recurring": "kickside_engine.plugins.cron",
    "Cancel": "kickside_engine.outcomes",
    "Discard": "kickside_engine.outcomes",
    "Done": "kickside_engine.outcomes",
    "Outcome": "kickside_engine.outcomes",
    "RetryAfter": "kickside_engine.outcomes",
    "Snooze": "kickside_engine.outcomes",
    "MAX_RESULT_BYTES": "kickside_engine.outcomes",
    "ResultNotStorableError": "kickside_engine.outcomes",
    "MAX_PROGRESS_BYTES": "kickside_engine.progress",
    "ProgressNotStorableError": "kickside_engine.progress",
    "NotRunningError": "kickside_engine.progress",
    "JobResult": "kickside_engine.waiting",
    "wait_for": "kickside_engine.waiting",
    "PurgeResult": "kickside_engine.slots",
    "SlotInfo": "kickside_engine.slots",
    "WakeKey": "kickside_engine.slots",
    "WakeMultiResult": "kickside_engine.slots",
    "WakeResult": "kickside_engine.slots",
    "disable_slot": "kickside_engine.slots",
    "enable_slot": "kickside_engine.slots",
    "list_slots": "kickside_engine.slots",
    "nudge_workers": "kickside_engine.slots",
    "park_job": "kickside_engine.slots",
    "purge_slot": "kickside_engine.slots",
    "wake_job": "kickside_engine.slots",
    "wake_multi": "kickside_engine.slots",
    "Database": "kickside_engine.store.database",
    "connect_database": "kickside_engine.store.database",
    "Subscription": "kickside_engine.store.listen",
    "listen": "kickside_engine.store.listen",
    "ArgsAdapter": "kickside_engine.typed_args",
    "Unique": "kickside_engine.uniqueness",
    "CapacityDeclaration": "kickside_engine.workers",
    "WorkerRegistry": "kickside_engine.workers",
    "WorkerSpec": "kickside_engine.workers",
    "After": "kickside_engine.workflow",
    "Upstream": "kickside_engine.workflow",
    "Workflow": "kickside_engine.workflow",
    "WorkflowInserted": "kickside_engine.workflow",
    "WorkflowStep": "kickside_engine.workflow",
    "WorkflowView": "kickside_engine.workflow",
    "batch": "kickside_engine.workflow",
    "get_workflow": "kickside_engine.workflow",
    "upstream_results": "kickside_engine.workflow",
    "upstream_results_async": "kickside_engine.workflow",
}


def __getattr__(name: str) -> Any:
    """Import a public name on its first use and keep it (later lookups do not come here)."""
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names too, before their first use."""
    return sorted(set(globals()) | set(__all__))


class _Package(types.ModuleType):
    """This package's module type: a public name is never rebound to a submodule.

    ``enqueue`` is a function defined in the submodule of the same name. The import system binds
    a submodule on its package when it first loads it, which would hide the function whenever
    anything imported ``kickside_engine.enqueue`` before the name was used (the eager imports
    this replaces bound the function after its module, so the function always won).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "MAX_PROGRESS_BYTES",
    "MAX_RESULT_BYTES",
    "After",
    "ArgsAdapter",
    "ArgsDecodeError",
    "AsyncDatabase",
    "AsyncWorkerPool",
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
    "JobResult",
    "JobState",
    "KicksideError",
    "MigrationError",
    "NotFoundError",
    "NotRunningError",
    "Outcome",
    "PermissionDeniedError",
    "ProgressNotStorableError",
    "PurgeResult",
    "ReadOnlyError",
    "Recurring",
    "ResultNotStorableError",
    "RetryAfter",
    "Run",
    "RunOutcome",
    "SlotInfo",
    "Snooze",
    "Subscription",
    "Unique",
    "Upstream",
    "WaitTimeoutError",
    "WakeKey",
    "WakeMultiResult",
    "WakeResult",
    "WorkerRegistry",
    "WorkerSpec",
    "Workflow",
    "WorkflowInserted",
    "WorkflowStep",
    "WorkflowView",
    "batch",
    "cancel_job_async",
    "claim",
    "complete",
    "connect_async_database",
    "connect_database",
    "control",
    "delete_job_async",
    "disable_slot",
    "disable_slot_async",
    "discard_job_async",
    "enable_slot",
    "enable_slot_async",
    "enqueue",
    "enqueue_async",
    "enqueue_fanout",
    "enqueue_fanout_async",
    "enqueue_many",
    "enqueue_many_async",
    "fail",
    "get_job",
    "get_job_async",
    "get_job_statuses",
    "get_job_statuses_async",
    "get_job_statuses_tx",
    "get_job_statuses_tx_async",
    "get_workflow",
    "list_slots",
    "listen",
    "migrate",
    "node_name",
    "nudge_workers",
    "nudge_workers_async",
    "park_job",
    "park_job_async",
    "purge_slot",
    "purge_slot_async",
    "record",
    "resolve_database_config",
    "resume_job_async",
    "retry_job_async",
    "upstream_results",
    "upstream_results_async",
    "wait_for",
    "wait_for_async",
    "wake_job",
    "wake_job_async",
    "wake_multi",
    "wake_multi_async",
]
