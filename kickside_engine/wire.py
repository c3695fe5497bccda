"""The messages between the supervisor and its executors, as plain tuples.

Every run sends a claimed job to an executor and its result back, so their encoding is on the
pool's hot path. Pickled as objects, each aware ``datetime`` costs about 8 µs and each class
reference about 3 µs (the pickler imports the module of every global it names, to check it), so
a claimed job took about 40 µs to pickle and 35 µs to unpickle. As tuples of plain values
(instants as microseconds since the epoch, UUIDs as integers) a round trip costs a fraction of
that. A job's error history (rarely more than a few entries) travels as objects.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from kickside_engine.lifecycle import ExecutionResult, ResultKind
from kickside_engine.models import (
    JOB_KINDS_BY_VALUE,
    JOB_STATES_BY_VALUE,
    ClaimedJob,
    Job,
    job_from_values,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_ZERO = timedelta(0)
_RESULT_KINDS = {k.value: k for k in ResultKind}


def pack_instant(value: datetime | None) -> int | datetime | None:
    """A UTC-aware datetime as integer microseconds since the epoch; anything else as is."""
    if value is not None and value.tzinfo is not None and value.utcoffset() == _ZERO:
        return (value - _EPOCH) // _MICROSECOND
    return value


def unpack_instant(value: Any) -> Any:
    """The inverse of :func:`pack_instant` (the datetime comes back with ``tzinfo=UTC``)."""
    if type(value) is int:
        return _EPOCH + timedelta(0, 0, value)  # positional: a third cheaper than by keyword
    return value


def pack_uuid(value: uuid.UUID | None) -> int | None:
    """A UUID as its 128-bit integer."""
    return None if value is None else value.int


def unpack_uuid(value: int | None) -> uuid.UUID | None:
    """The inverse of :func:`pack_uuid`."""
    return None if value is None else uuid.UUID(int=value)


def encode_job(job: Job) -> tuple[Any, ...]:
    """``job``'s fields, in order, in their wire form."""
    j = job
    return (
        j.id.int,
        j.kind.value,
        j.state.value,
        j.queue,
        j.worker,
        j.args,
        j.meta,
        j.tags,
        j.errors,
        j.attempt,
        j.max_attempts,
        j.priority,
        j.unique_key,
        j.namespace,
        j.scope,
        j.identity_key,
        j.concurrency_key,
        j.capacity_group,
        j.demand_pending,
        j.control_pending,
        j.demand_seq,
        j.lease_owner,
        pack_uuid(j.lease_token),
        pack_instant(j.lease_expires_at),
        j.rescue_count,
        j.max_execution_ms,
        pack_instant(j.inserted_at),
        pack_instant(j.scheduled_at),
        pack_instant(j.attempted_at),
        pack_instant(j.completed_at),
        pack_instant(j.cancelled_at),
        pack_instant(j.discarded_at),
        pack_instant(j.finalized_at),
        pack_instant(j.updated_at),
    )


def decode_job(v: tuple[Any, ...]) -> Job:
    """The inverse of :func:`encode_job`."""
    values = (
        uuid.UUID(int=v[0]),
        JOB_KINDS_BY_VALUE[v[1]],
        JOB_STATES_BY_VALUE[v[2]],
        *v[3:22],
        unpack_uuid(v[22]),
        unpack_instant(v[23]),
        v[24],
        v[25],
        *[unpack_instant(x) for x in v[26:34]],
        None,  # a claimed job's earlier result does not travel to its executor
        None,  # nor its progress (a claim cleared it)
    )
    return job_from_values(values)


def encode_claimed(claimed: ClaimedJob) -> tuple[Any, ...]:
    """A claimed job as the supervisor sends it to an executor."""
    return (
        encode_job(claimed.job),
        claimed.node,
        claimed.lease_token.int,
        pack_instant(claimed.lease_expires_at),
    )


def decode_claimed(v: tuple[Any, ...]) -> ClaimedJob:
    """The inverse of :func:`encode_claimed`."""
    return ClaimedJob(decode_job(v[0]), v[1], uuid.UUID(int=v[2]), unpack_instant(v[3]))


def encode_result(result: ExecutionResult) -> tuple[Any, ...]:
    """An execution's result as an executor sends it back."""
    r = result
    return (
        r.kind.value,
        pack_instant(r.finished_at),
        r.duration_ms,
        r.error,
        r.snooze,
        r.retry_after_ms,
        r.demand_satisfied,
        r.park,
        r.result,
        r.progress,
    )


def decode_result(v: tuple[Any, ...]) -> ExecutionResult:
    """The inverse of :func:`encode_result`."""
    return ExecutionResult(_RESULT_KINDS[v[0]], unpack_instant(v[1]), *v[2:])
