"""The messages between the supervisor and its executors, as plain tuples.

Every run sends a claimed job to an executor and its result back, so their encoding is on the
pool's hot path. Pickled as objects, each aware ``datetime`` costs about 8 µs and each class
reference about 3 µs (the pickler imports the module of every global it names, to check it), so
a claimed job took about 40 µs to pickle and 35 µs to unpickle. As tuples of plain values
(instants as microseconds since the epoch, UUIDs as integers) a round trip costs a fraction of
that. A job's error history (rarely more than a few entries) travels as objects.

The jobs of one message share most of their instants (a claim stamps its batch with one time,
an enqueue its rows with another), so a message's instants are made once each: encoding and
decoding take an ``instants`` memo that lives as long as the message.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from kickside_engine.clock import UNIX_EPOCH
from kickside_engine.ids import uuid_from_int
from kickside_engine.lifecycle import ExecutionResult, ResultKind
from kickside_engine.models import (
    JOB_KINDS_BY_VALUE,
    JOB_STATES_BY_VALUE,
    ClaimedJob,
    Job,
    assemble,
    claimed_job,
    job_from_values,
)

_MICROSECOND = timedelta(microseconds=1)
_ZERO = timedelta(0)
_RESULT_KINDS = {k.value: k for k in ResultKind}


def pack_instant(value: datetime | None) -> int | datetime | None:
    """A UTC-aware datetime as integer microseconds since the epoch; anything else as is."""
    if value is not None and value.tzinfo is not None and value.utcoffset() == _ZERO:
        return (value - UNIX_EPOCH) // _MICROSECOND
    return value


def unpack_instant(value: Any) -> Any:
    """The inverse of :func:`pack_instant` (the datetime comes back with ``tzinfo=UTC``)."""
    if type(value) is int:
        return UNIX_EPOCH + timedelta(0, 0, value)  # positional: a third cheaper than by keyword
    return value


def _packed(value: datetime | None, memo: dict[Any, Any]) -> Any:
    """:func:`pack_instant` through ``memo`` (equal instants are packed once). Only instants
    in ``UTC`` itself go through it: an instant in another zone equals its UTC twin, and must
    not come back as it."""
    if value is None or value.tzinfo is not UTC:
        return pack_instant(value)
    packed = memo.get(value)
    if packed is None:
        packed = memo[value] = pack_instant(value)
    return packed


def _unpacked(value: Any, memo: dict[Any, Any]) -> Any:
    """:func:`unpack_instant` through ``memo``: equal instants come back as one object."""
    if type(value) is not int:
        return value
    made = memo.get(value)
    if made is None:
        made = memo[value] = UNIX_EPOCH + timedelta(0, 0, value)
    return made


def pack_uuid(value: uuid.UUID | None) -> int | None:
    """A UUID as its 128-bit integer."""
    return None if value is None else value.int


def unpack_uuid(value: int | None) -> uuid.UUID | None:
    """The inverse of :func:`pack_uuid`."""
    return None if value is None else uuid.UUID(int=value)


def encode_job(job: Job, instants: dict[Any, Any] | None = None) -> tuple[Any, ...]:
    """``job``'s fields, in order, in their wire form (``instants``: the message's memo)."""
    j = job
    m: dict[Any, Any] = {} if instants is None else instants
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
        _packed(j.lease_expires_at, m),
        j.rescue_count,
        j.max_execution_ms,
        _packed(j.inserted_at, m),
        _packed(j.scheduled_at, m),
        _packed(j.attempted_at, m),
        _packed(j.completed_at, m),
        _packed(j.cancelled_at, m),
        _packed(j.discarded_at, m),
        _packed(j.finalized_at, m),
        _packed(j.updated_at, m),
    )


def decode_job(v: tuple[Any, ...], instants: dict[Any, Any] | None = None) -> Job:
    """The inverse of :func:`encode_job` (``instants``: the message's memo)."""
    m: dict[Any, Any] = {} if instants is None else instants
    return job_from_values(
        (
            uuid_from_int(v[0]),
            JOB_KINDS_BY_VALUE[v[1]],
            JOB_STATES_BY_VALUE[v[2]],
            *v[3:22],
            None if v[22] is None else uuid_from_int(v[22]),
            _unpacked(v[23], m),
            v[24],
            v[25],
            _unpacked(v[26], m),
            _unpacked(v[27], m),
            _unpacked(v[28], m),
            _unpacked(v[29], m),
            _unpacked(v[30], m),
            _unpacked(v[31], m),
            _unpacked(v[32], m),
            _unpacked(v[33], m),
            None,  # a claimed job's earlier result does not travel to its executor
            None,  # nor its progress (a claim cleared it)
        )
    )


def encode_claimed(claimed: ClaimedJob, instants: dict[Any, Any] | None = None) -> tuple[Any, ...]:
    """A claimed job as the supervisor sends it to an executor (``instants``: the memo of
    the message it travels in, shared by its jobs)."""
    m: dict[Any, Any] = {} if instants is None else instants
    return (
        encode_job(claimed.job, m),
        claimed.node,
        claimed.lease_token.int,
        _packed(claimed.lease_expires_at, m),
    )


def decode_claimed(v: tuple[Any, ...], instants: dict[Any, Any] | None = None) -> ClaimedJob:
    """The inverse of :func:`encode_claimed` (``instants``: the message's memo)."""
    m: dict[Any, Any] = {} if instants is None else instants
    job = decode_job(v[0], m)
    token = job.lease_token
    if token is None or token.int != v[2]:
        token = uuid_from_int(v[2])
    return claimed_job(job, v[1], token, _unpacked(v[3], m))


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
    return assemble(
        ExecutionResult,
        kind=_RESULT_KINDS[v[0]],
        finished_at=unpack_instant(v[1]),
        duration_ms=v[2],
        error=v[3],
        snooze=v[4],
        retry_after_ms=v[5],
        demand_satisfied=v[6],
        park=v[7],
        result=v[8],
        progress=v[9],
    )
