"""The testing helpers applications use: perform_job, assert/refute_enqueued, kickside_db."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kickside_engine import (
    Cancel,
    Database,
    Done,
    InvalidArgumentError,
    JobBuilder,
    Snooze,
    claim,
    enqueue,
    fail,
    get_job,
)
from kickside_engine.outcomes import retry_hint_ms
from kickside_engine.testing import assert_enqueued, perform_job, refute_enqueued

from ..support.workers import cancel, ok, snooze


def test_perform_job_normalises_the_outcome() -> None:
    assert perform_job(ok, {"x": 1}) == Done()
    assert isinstance(perform_job(snooze, {"seconds": 5}), Snooze)
    assert perform_job(cancel, {"post_id": 9}) == Cancel("post 9 deleted")
    # Args are checked as enqueue checks them: what JSON cannot hold is refused, named.
    with pytest.raises(InvalidArgumentError, match=r"args\['when'\] is of type object"):
        perform_job(ok, {"when": object()})


def test_assert_and_refute_enqueued(kickside_db: Database) -> None:
    enqueue(kickside_db, JobBuilder("ok", {"user_id": 1, "extra": True}).tags(["digest"]))
    assert_enqueued(kickside_db, worker="ok", args={"user_id": 1}, tags=["digest"])
    assert_enqueued(kickside_db, worker=ok, count=1)
    refute_enqueued(kickside_db, worker="ok", args={"user_id": 2})
    with pytest.raises(AssertionError, match="enqueued"):
        assert_enqueued(kickside_db, worker="nope")
    with pytest.raises(AssertionError):
        refute_enqueued(kickside_db, worker="ok")


def test_assert_enqueued_compares_args_as_given_and_shows_them_redacted(
    kickside_db: Database,
) -> None:
    args = {"user_id": 1, "password": "hunter2", "token_count": 1200}
    enqueue(kickside_db, JobBuilder("ok", args))
    # Stored as given, so a test can match the very args it enqueued, secret included.
    assert_enqueued(kickside_db, worker="ok", args=args)
    refute_enqueued(kickside_db, worker="ok", args={"password": "[REDACTED]"})
    with pytest.raises(AssertionError) as failure:
        assert_enqueued(kickside_db, worker="ok", args={"user_id": 2})
    message = str(failure.value)
    assert "hunter2" not in message  # a test log is shown too
    assert "'password': '[REDACTED]'" in message and "'token_count': 1200" in message


def test_a_malformed_provider_retry_hint_is_ignored() -> None:
    class Hinted(Exception):
        retry_after_ms: object = "soon"

    assert retry_hint_ms(Hinted()) is None
    Hinted.retry_after_ms = -5
    assert retry_hint_ms(Hinted()) is None
    Hinted.retry_after_ms = float("nan")
    assert retry_hint_ms(Hinted()) is None
    Hinted.retry_after_ms = 2500
    assert retry_hint_ms(Hinted()) == 2500


def test_an_explicit_invalid_retry_floor_is_rejected_and_writes_nothing(db: Database) -> None:
    inserted = enqueue(db, JobBuilder("ok"))
    (claimed,) = claim(db, queue="default", node="n1")
    with pytest.raises(InvalidArgumentError, match="retry_after_ms"):
        fail(db, claimed, "boom", retry_after_ms=-1)
    assert get_job(db, inserted.id).state.value == "executing"  # type: ignore[union-attr]
    assert fail(db, claimed, "boom", retry_after_ms=3_600_000)
    failed = get_job(db, inserted.id)
    assert failed is not None and failed.scheduled_at - failed.errors[0].at >= timedelta(hours=1)
