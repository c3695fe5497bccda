"""The supervisor-executor messages: a claimed job and a result come back exactly as they left,
field for field and type for type, through a real pickle round trip as the pipe does it."""

from __future__ import annotations

import dataclasses
import pickle
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from kickside_engine import Database, JobBuilder
from kickside_engine.api import claim
from kickside_engine.lifecycle import ExecutionResult, ResultKind, done_result, settlement_for
from kickside_engine.models import ClaimedJob, JobError, JobKind, JobState
from kickside_engine.wire import (
    decode_claimed,
    decode_result,
    encode_claimed,
    encode_result,
    pack_instant,
    unpack_instant,
)


def _through_the_pipe(value: object) -> object:
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def _assert_identical(got: object, want: object) -> None:
    """Equal, and every field of the same type (an instant stays an aware datetime)."""
    assert got == want
    assert dataclasses.is_dataclass(got) and dataclasses.is_dataclass(want)
    for f in dataclasses.fields(want):  # type: ignore[arg-type]
        a, b = getattr(got, f.name), getattr(want, f.name)
        assert type(a) is type(b), f.name
        if isinstance(b, datetime):
            assert a.utcoffset() == b.utcoffset(), f.name


def _claimed(db: Database) -> ClaimedJob:
    JobBuilder("noop", {"order": 42, "note": "ünïcode"}).tags(["a", "b"]).meta(
        {"trace": "x"}
    ).insert(db)
    (claimed,) = claim(db, queue="default", node="node-1", limit=1)
    return claimed


def test_a_claimed_job_from_the_database_round_trips(db: Database) -> None:
    claimed = _claimed(db)
    back = decode_claimed(_through_the_pipe(encode_claimed(claimed)))  # type: ignore[arg-type]
    _assert_identical(back, claimed)
    _assert_identical(back.job, claimed.job)
    assert back.attempt == claimed.attempt == 1


def test_every_optional_field_round_trips_set_and_unset(db: Database) -> None:
    job = _claimed(db).job
    at = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
    full = dataclasses.replace(
        job,
        kind=JobKind.SLOT,
        state=JobState.EXECUTING,
        errors=[JobError(attempt=1, at=at, error="ValueError: boom")],
        unique_key="u" * 64,
        namespace="ns",
        scope="sc",
        identity_key="k",
        concurrency_key="ck",
        capacity_group="cg",
        demand_pending=True,
        control_pending=False,
        demand_seq=2**40,
        lease_owner="node-1",
        lease_token=uuid.uuid4(),
        lease_expires_at=at + timedelta(seconds=30),
        rescue_count=3,
        max_execution_ms=5_000,
        attempted_at=at,
        completed_at=at + timedelta(microseconds=1),  # all distinct: a swap would show
        cancelled_at=at + timedelta(microseconds=2),
        discarded_at=at + timedelta(microseconds=3),
        finalized_at=at + timedelta(microseconds=4),
    )
    empty = dataclasses.replace(
        job,
        demand_pending=False,
        control_pending=True,
        lease_owner=None,
        lease_token=None,
        lease_expires_at=None,
        max_execution_ms=None,
        attempted_at=None,
    )
    for variant in (full, empty):
        claimed = ClaimedJob(variant, "node-1", uuid.uuid4(), at)
        back = decode_claimed(_through_the_pipe(encode_claimed(claimed)))  # type: ignore[arg-type]
        _assert_identical(back.job, variant)
        _assert_identical(back, claimed)


@pytest.mark.parametrize(
    "result",
    [
        ExecutionResult(ResultKind.DONE, datetime.now(UTC), 0),
        ExecutionResult(ResultKind.DONE, datetime.now(UTC), 7, demand_satisfied=True, park=True),
        ExecutionResult(ResultKind.SNOOZE, datetime.now(UTC), 1, snooze=timedelta(seconds=90)),
        ExecutionResult(
            ResultKind.ERROR, datetime.now(UTC), 12, error="KeyError: 'x'", retry_after_ms=2.5
        ),
        ExecutionResult(ResultKind.TIMEOUT, datetime.now(UTC), 30_000, error="timeout"),
    ],
    ids=lambda r: r.kind.value,
)
def test_results_round_trip(result: ExecutionResult) -> None:
    back = decode_result(_through_the_pipe(encode_result(result)))  # type: ignore[arg-type]
    _assert_identical(back, result)


def test_instants_are_exact_to_the_microsecond_and_only_utc_ones_are_packed() -> None:
    for at in (
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 11, 30, 12, 0, 0, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 11, 30, 12, 0, 0, 1, tzinfo=timezone(timedelta(0))),
    ):
        packed = pack_instant(at)
        assert type(packed) is int
        assert unpack_instant(_through_the_pipe(packed)) == at
    elsewhere = datetime(2026, 11, 30, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    naive = datetime(2026, 11, 30, 12, 0)
    for at in (elsewhere, naive, None):
        assert pack_instant(at) is at  # travels as the object it is
        assert unpack_instant(at) is at


def test_jobs_of_one_message_share_its_instants_and_each_keeps_its_own(db: Database) -> None:
    """A message's jobs are encoded and decoded through one memo of instants: equal instants
    are made once, yet every job comes back with its own values, and an instant in another
    zone that equals a UTC one keeps its zone."""
    job = _claimed(db).job
    at = datetime(2026, 12, 7, 6, 0, 0, 5, tzinfo=UTC)
    same_instant_elsewhere = at.astimezone(timezone(timedelta(hours=2)))
    jobs = [
        dataclasses.replace(job, id=uuid.uuid4(), attempted_at=at, updated_at=at),
        dataclasses.replace(
            job, id=uuid.uuid4(), attempted_at=same_instant_elsewhere, updated_at=at
        ),
        dataclasses.replace(job, id=uuid.uuid4(), attempted_at=at + timedelta(microseconds=1)),
    ]
    sent = [
        encode_claimed(ClaimedJob(j, "node-1", uuid.uuid4(), at), memo)
        for memo in [{}]
        for j in jobs
    ]
    memo: dict[object, object] = {}
    back = [decode_claimed(v, memo) for v in _through_the_pipe(sent)]  # type: ignore[attr-defined]
    for got, want in zip(back, jobs, strict=True):
        _assert_identical(got.job, want)
    assert back[1].job.attempted_at.utcoffset() == timedelta(hours=2)  # type: ignore[union-attr]
    assert back[0].job.updated_at is back[1].job.updated_at  # made once for the message


def test_assemble_makes_what_the_constructor_makes(db: Database) -> None:
    at = datetime(2026, 12, 7, tzinfo=UTC)
    built = ExecutionResult(ResultKind.ERROR, at, 3, error="boom", retry_after_ms=1.5)
    assembled = decode_result(encode_result(built))
    assert assembled == built and hash(assembled) == hash(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        assembled.error = "changed"  # type: ignore[misc]


def test_every_record_the_pool_assembles_has_every_field_of_its_class(db: Database) -> None:
    """Assembled without ``__init__``, a record missing a field would fail only where it is
    read: each maker is checked against its dataclass's fields."""
    claimed = _claimed(db)
    done = ExecutionResult(ResultKind.DONE, datetime.now(UTC), 1)
    made = [
        claimed,
        decode_claimed(encode_claimed(claimed)),
        decode_result(encode_result(done)),
        done_result(done.finished_at, 1),
        settlement_for(claimed, done),
    ]
    assert done_result(done.finished_at, 1) == done
    for record in made:
        names = {f.name for f in dataclasses.fields(record)}  # type: ignore[arg-type]
        assert set(vars(record)) == names, type(record).__name__
