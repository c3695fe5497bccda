"""Uniqueness: by args, by selected keys, by worker; period buckets; incomplete or all."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from kickside_engine import (
    Database,
    InvalidArgumentError,
    JobBuilder,
    JobState,
    Unique,
    enqueue,
    get_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.testing import drain_jobs

from ..support.workers import registry


def test_unique_by_args_returns_the_existing_job(db: Database) -> None:
    rule = Unique.args()
    first = enqueue(db, JobBuilder("ok", {"user_id": 1}).unique(rule))
    again = enqueue(db, JobBuilder("ok", {"user_id": 1}).unique(rule))
    other = enqueue(db, JobBuilder("ok", {"user_id": 2}).unique(rule))
    other_queue = enqueue(db, JobBuilder("ok", {"user_id": 1}).queue("q2").unique(rule))
    assert not first.duplicate and again.duplicate and again.id == first.id
    assert not other.duplicate and not other_queue.duplicate


def test_unique_by_selected_keys_ignores_the_rest(db: Database) -> None:
    rule = Unique.args_keys("user_id")
    first = enqueue(db, JobBuilder("ok", {"user_id": 1, "at": "09:00"}).unique(rule))
    again = enqueue(db, JobBuilder("ok", {"user_id": 1, "at": "10:00"}).unique(rule))
    assert again.duplicate and again.id == first.id


def test_unique_by_worker_whatever_the_args(db: Database) -> None:
    rule = Unique.worker()
    first = enqueue(db, JobBuilder("ok", {"a": 1}).unique(rule))
    assert enqueue(db, JobBuilder("ok", {"b": 2}).unique(rule)).id == first.id
    assert not enqueue(db, JobBuilder("cancel", {"b": 2}).unique(rule)).duplicate


def test_incomplete_uniqueness_is_released_when_the_job_finishes(db: Database) -> None:
    rule = Unique.args()
    first = enqueue(db, JobBuilder("ok", {"n": 1}).unique(rule))
    drain_jobs(db, registry)
    done = get_job(db, first.id)
    assert done is not None and done.state is JobState.COMPLETED and done.unique_key is None
    second = enqueue(db, JobBuilder("ok", {"n": 1}).unique(rule))
    assert not second.duplicate and second.id != first.id


def test_all_states_uniqueness_keeps_the_key_until_pruned(db: Database) -> None:
    rule = Unique.args().keep_all()
    first = enqueue(db, JobBuilder("ok", {"n": 1}).unique(rule))
    drain_jobs(db, registry)
    done = get_job(db, first.id)
    assert done is not None and done.unique_key is not None
    assert done.meta["unique_states"] == "all"
    again = enqueue(db, JobBuilder("ok", {"n": 1}).unique(rule))
    assert again.duplicate and again.id == first.id and again.state is JobState.COMPLETED


def test_period_buckets_debounce(db: Database) -> None:
    rule = Unique.args().within(timedelta(minutes=1))
    base = datetime.fromtimestamp(math.floor(utcnow().timestamp() / 60) * 60, UTC)
    first = enqueue(db, JobBuilder("ok", {"post": 7}).unique(rule), now=base)
    same = enqueue(db, JobBuilder("ok", {"post": 7}).unique(rule), now=base + timedelta(seconds=59))
    nxt = enqueue(db, JobBuilder("ok", {"post": 7}).unique(rule), now=base + timedelta(seconds=60))
    assert same.duplicate and same.id == first.id
    assert not nxt.duplicate


def test_unique_rules_are_validated() -> None:
    with pytest.raises(InvalidArgumentError):
        Unique.args_keys()
    with pytest.raises(InvalidArgumentError):
        Unique.args().within(timedelta(0))


def test_worker_default_uniqueness_applies_and_can_be_removed(db: Database) -> None:
    from kickside_engine import WorkerRegistry

    reg = WorkerRegistry()

    @reg.worker("digest", unique=Unique.args_keys("user_id"))
    def digest(args: dict, job: object) -> None:
        return None

    first = digest.new({"user_id": 5}).insert(db)  # type: ignore[attr-defined]
    assert digest.new({"user_id": 5}).insert(db).duplicate  # type: ignore[attr-defined]
    assert not digest.new({"user_id": 5}).unique(None).insert(db).duplicate  # type: ignore[attr-defined]
    assert get_job(db, first.id) is not None
