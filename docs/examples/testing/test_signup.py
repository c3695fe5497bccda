"""test_signup.py: testing jobs with kickside_engine.testing and the kickside_db fixture.

The kickside_db fixture (a migrated SQLite database in the test's tmp_path) comes from
Kickside's pytest plugin, which pytest loads by itself once Kickside is installed.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from signup import SENT, registry, sign_up, welcome_mail

from kickside_engine import Database, Discard
from kickside_engine.testing import assert_enqueued, drain_jobs, perform_job, refute_enqueued


def test_sign_up_enqueues_a_welcome_mail_in_ten_minutes(kickside_db: Database) -> None:
    sign_up(kickside_db, "ada@example.com")

    assert_enqueued(
        kickside_db,
        worker=welcome_mail,  # a decorated worker, or its name
        args={"email": "ada@example.com"},  # a subset of the stored args
        queue="mailers",
        scheduled_at=datetime.now(UTC) + timedelta(minutes=10),
        delta=timedelta(seconds=30),
    )
    refute_enqueued(kickside_db, worker="welcome_mail", args={"email": "bob@example.com"})


def test_draining_runs_the_mail(kickside_db: Database) -> None:
    sign_up(kickside_db, "ada@example.com")

    result = drain_jobs(kickside_db, registry)  # only due jobs: the mail waits 10 minutes
    assert result.total == 0
    result = drain_jobs(kickside_db, registry, with_scheduled=True)  # as if the time had come
    assert result.completed == 1 and SENT == ["ada@example.com"]


def test_a_bad_address_is_discarded() -> None:
    assert perform_job(welcome_mail, {"email": "nobody"}) == Discard("not an address: nobody")


def test_an_error_propagates_from_perform_job() -> None:
    with pytest.raises(KeyError):
        perform_job(welcome_mail, {})  # no "email": the worker's exception reaches the test
