"""The engine's vocabulary: job states and their transitions, and read models.

Every model is a frozen dataclass; ``JobState`` values equal the values stored in the database.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, TypeVar

_T = TypeVar("_T")

#: The key of a slot's ``meta`` that records a purge request (when and by whom): until the
#: purge is done the slot never starts another run.
PURGE_META_KEY = "purge_requested"


class JobState(enum.StrEnum):
    """Where a job is in its life.

    ``scheduled`` waits for its time; ``available`` can be claimed now; ``executing`` holds a
    lease; ``retryable`` failed and waits for its backoff; ``completed``, ``cancelled`` and
    ``discarded`` are final; a slot job rests in ``parked`` between demands and ``disabled``
    takes it out of service; a workflow's job is ``waiting`` until its upstream jobs are final.
    """

    SCHEDULED = "scheduled"
    AVAILABLE = "available"
    EXECUTING = "executing"
    RETRYABLE = "retryable"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    DISCARDED = "discarded"
    PARKED = "parked"
    DISABLED = "disabled"
    WAITING = "waiting"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


#: The named sets of states every rule uses (the state machine's one authority, with
#: :data:`TRANSITIONS`).
FINAL_STATES = frozenset({JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED})
INCOMPLETE_STATES = frozenset(set(JobState) - FINAL_STATES)
#: Waiting to run: claimable now or once its time comes.
PENDING_STATES = frozenset({JobState.SCHEDULED, JobState.AVAILABLE, JobState.RETRYABLE})
#: What the Stager makes ``available`` once ``scheduled_at`` has passed.
STAGED_STATES = frozenset({JobState.SCHEDULED, JobState.RETRYABLE})
#: What an ordinary wake makes due now (a ``retryable`` job only on a control wake).
WAKE_MADE_DUE_STATES = frozenset({JobState.PARKED, JobState.SCHEDULED, JobState.AVAILABLE})
#: States only slot jobs have.
SLOT_ONLY_STATES = frozenset({JobState.PARKED, JobState.DISABLED})

#: Every allowed transition, once. Operator actions and the engine both check against it.
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.SCHEDULED: frozenset(
        {
            JobState.AVAILABLE,
            JobState.CANCELLED,
            JobState.DISCARDED,
            JobState.PARKED,
            JobState.DISABLED,
        }
    ),
    JobState.AVAILABLE: frozenset(
        {
            JobState.EXECUTING,
            JobState.SCHEDULED,
            JobState.CANCELLED,
            JobState.DISCARDED,
            JobState.PARKED,
            JobState.DISABLED,
        }
    ),
    JobState.EXECUTING: frozenset(
        {
            JobState.COMPLETED,
            JobState.RETRYABLE,
            JobState.SCHEDULED,
            JobState.CANCELLED,
            JobState.DISCARDED,
            JobState.AVAILABLE,
            JobState.PARKED,
        }
    ),
    JobState.RETRYABLE: frozenset(
        {
            JobState.AVAILABLE,
            JobState.CANCELLED,
            JobState.DISCARDED,
            JobState.PARKED,
            JobState.DISABLED,
        }
    ),
    # A workflow's retry puts a final job back to waiting when its upstreams run again.
    JobState.COMPLETED: frozenset({JobState.AVAILABLE, JobState.WAITING}),
    JobState.CANCELLED: frozenset({JobState.AVAILABLE, JobState.WAITING}),
    JobState.DISCARDED: frozenset({JobState.AVAILABLE, JobState.WAITING}),
    JobState.PARKED: frozenset(
        {
            JobState.AVAILABLE,
            JobState.SCHEDULED,
            JobState.DISABLED,
            JobState.CANCELLED,
            JobState.DISCARDED,
        }
    ),
    JobState.DISABLED: frozenset({JobState.PARKED, JobState.AVAILABLE, JobState.CANCELLED}),
    # Released by the settle of its last upstream: due now, or at its scheduled time.
    JobState.WAITING: frozenset(
        {JobState.AVAILABLE, JobState.SCHEDULED, JobState.CANCELLED, JobState.DISCARDED}
    ),
}


class JobKind(enum.StrEnum):
    """A one-shot job runs until it succeeds; a slot job runs whenever it has demand."""

    ONESHOT = "oneshot"
    SLOT = "slot"


class RunOutcome(enum.StrEnum):
    """How one execution attempt ended (``kickside_job_run.outcome``)."""

    COMPLETED = "completed"
    FAILED = "failed"
    SNOOZED = "snoozed"
    CANCELLED = "cancelled"
    DISCARDED = "discarded"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    RESCUED = "rescued"


@dataclass(frozen=True)
class JobError:
    """One entry of a job's error history, already redacted."""

    attempt: int
    at: datetime
    error: str


@dataclass(frozen=True)
class Job:
    """A row of ``kickside_job``."""

    id: uuid.UUID
    kind: JobKind
    state: JobState
    queue: str
    worker: str
    args: dict[str, Any]
    meta: dict[str, Any]
    tags: list[str]
    errors: list[JobError]
    attempt: int
    max_attempts: int
    priority: int
    unique_key: str | None
    namespace: str | None
    scope: str | None
    identity_key: str | None
    concurrency_key: str | None
    capacity_group: str | None
    demand_pending: bool
    control_pending: bool
    demand_seq: int
    lease_owner: str | None
    lease_token: uuid.UUID | None
    lease_expires_at: datetime | None
    rescue_count: int
    max_execution_ms: int | None
    inserted_at: datetime
    scheduled_at: datetime
    attempted_at: datetime | None
    completed_at: datetime | None
    cancelled_at: datetime | None
    discarded_at: datetime | None
    finalized_at: datetime | None
    updated_at: datetime
    #: What the worker returned (a JSON value), None when it returned nothing. Stored as given;
    #: redact it (:func:`kickside_engine.redact.redact_value`) wherever it is shown.
    result: Any = None
    #: What the live (or latest) attempt last reported with :meth:`report_progress`: a fraction
    #: in [0, 1] or a small dict, None before any report. A claim clears it. Redact it wherever
    #: it is shown, as the result.
    progress: Any = None

    @property
    def is_slot(self) -> bool:
        return self.kind is JobKind.SLOT

    def report_progress(self, progress: float | dict[str, Any]) -> None:
        """Report how far this running attempt has got: a fraction between 0 and 1, or a
        small JSON object (at most :data:`~kickside_engine.progress.MAX_PROGRESS_BYTES`).

        Call it as often as you like from the worker (or threads it starts): reports are
        coalesced, at most one per second is written while the job runs, and the last one is
        written with the attempt's outcome. A bad value raises
        :class:`~kickside_engine.progress.ProgressNotStorableError`; a job that is not running
        here raises :class:`~kickside_engine.progress.NotRunningError`.
        """
        from kickside_engine.progress import report

        report(self, progress)


#: :class:`Job`'s field names in order (the order of ``kickside_job``'s columns too).
JOB_FIELDS = tuple(f.name for f in fields(Job))
#: Members by value: looking one up through its enum class costs about 1 µs, a dict nothing.
JOB_KINDS_BY_VALUE = {kind.value: kind for kind in JobKind}
JOB_STATES_BY_VALUE = {state.value: state for state in JobState}


def assemble(cls: type[_T], **values: Any) -> _T:
    """An instance of the frozen dataclass ``cls`` with exactly these field values, made as
    unpickling makes one, without ``__init__``: a frozen dataclass's ``__init__`` sets each
    field through ``object.__setattr__``, and the pool makes a few such objects for every job
    it runs. The caller gives every field, each already right (``__post_init__`` does not
    run); the tests check each caller against the dataclass's fields, not every call here."""
    made = object.__new__(cls)
    made.__dict__.update(values)
    return made


def claimed_job(job: Job, node: str, lease_token: uuid.UUID, expires: datetime) -> ClaimedJob:
    """``ClaimedJob(job, node, lease_token, expires)``, made as :func:`assemble` makes one."""
    return assemble(
        ClaimedJob,
        job=job,
        node=node,
        lease_token=lease_token,
        lease_expires_at=expires,
        attempt=job.attempt,
    )


def job_from_values(values: Iterable[Any]) -> Job:
    """A :class:`Job` from its field values in :data:`JOB_FIELDS` order, already of the right
    types, without the frozen dataclass's ``__init__`` (what unpickling does too): on the hot
    paths that build dozens of jobs per round trip, ``__init__`` cost more than the rest."""
    job = object.__new__(Job)
    job.__dict__.update(zip(JOB_FIELDS, values, strict=True))
    return job


@dataclass(frozen=True)
class Run:
    """A row of ``kickside_job_run``: one execution attempt."""

    id: int
    job_id: uuid.UUID
    attempt: int
    queue: str
    worker: str
    node: str
    lease_token: uuid.UUID
    code_version: str | None
    queue_ms: int | None
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    outcome: RunOutcome | None
    error: str | None

    @property
    def settled(self) -> bool:
        return self.finished_at is not None


@dataclass(frozen=True)
class Inserted:
    """What an enqueue did: the job's id, and whether an existing unique job was found."""

    id: uuid.UUID
    duplicate: bool = False
    state: JobState = JobState.AVAILABLE


@dataclass(frozen=True)
class ClaimedJob:
    """A job claimed under a lease, with everything needed to run it and record its outcome."""

    job: Job
    node: str
    lease_token: uuid.UUID
    lease_expires_at: datetime
    attempt: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attempt", self.job.attempt)
