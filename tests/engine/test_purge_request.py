"""A purge request on both backends (issue 19.6): it clears the slot's pending wakes so the slot
never starts another run, it is visible until the purge is done, and a purge run to its end
leaves one audit row with its outcome.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from kickside_engine import (
    ClaimedJob,
    ConflictError,
    Database,
    JobBuilder,
    JobState,
    claim,
    complete,
    enqueue,
    fail,
    get_job,
    record,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, list_audit, retry_job
from kickside_engine.control.explain import explain
from kickside_engine.control.purge_runner import PurgeProgress, purge_until_done
from kickside_engine.lifecycle import ExecutionResult, ResultKind
from kickside_engine.plugins.lifeline import rescue_expired
from kickside_engine.purge import purge_request, purge_slot, withdraw_purge
from kickside_engine.slots import list_slots, wake_job, wake_multi

NS, SCOPE, KEY = "app.sync", "tenant:1", "k1"
IDENTITY: dict[str, Any] = {"namespace": NS, "scope": SCOPE, "key": KEY}
ME = Actor("tester", "testhost")


def enroll(db: Database, *, demand: bool = False) -> uuid.UUID:
    return enqueue(db, JobBuilder("ok", {}).slot(NS, SCOPE, KEY, demand=demand)).id


def running(db: Database) -> tuple[uuid.UUID, ClaimedJob]:
    job_id = enroll(db, demand=True)
    (claimed,) = claim(db, queue="default", node="n1")
    assert claimed.job.id == job_id
    return job_id, claimed


def pending(db: Database, **options: Any) -> dict[str, Any]:
    with pytest.raises(ConflictError) as raised:
        purge_slot(db, **IDENTITY, **options)
    assert raised.value.details["cleanup_pending"] is True
    return raised.value.details


def demand_both_ways(db: Database, job_id: uuid.UUID) -> None:
    wake_job(db, job_id)  # a control wake
    with db.begin() as conn:  # ordinary demand
        assert wake_multi(db, [(NS, SCOPE, KEY)], conn=conn).woken == [job_id]


def test_a_purge_clears_pending_wakes_so_the_running_slot_never_runs_again(
    db: Database,
) -> None:
    job_id, claimed = running(db)
    demand_both_ways(db, job_id)
    slot = get_job(db, job_id)
    assert slot is not None and slot.demand_pending and slot.control_pending
    assert pending(db, actor=ME)["wait_for"] == "lease_release"
    slot = get_job(db, job_id)
    assert slot is not None and not slot.demand_pending and not slot.control_pending
    assert slot.state is JobState.EXECUTING  # the current run ends as it would
    assert complete(db, claimed)
    slot = get_job(db, job_id)
    # Without the purge, the wakes would have made it available: a second full run.
    assert slot is not None and slot.state is JobState.PARKED
    assert claim(db, queue="default", node="n1") == []
    assert purge_slot(db, **IDENTITY) == 1 and get_job(db, job_id) is None


def test_a_slot_waiting_to_run_is_parked_by_the_request(db: Database) -> None:
    job_id, claimed = running(db)
    assert complete(db, claimed)
    wake_job(db, job_id)
    slot = get_job(db, job_id)
    assert slot is not None and slot.state is JobState.AVAILABLE
    # An open run with no lease (waiting for the Lifeline) keeps the purge from finishing.
    with db.begin() as conn:
        run = db.tables.job_run
        conn.execute(
            run.insert().values(
                job_id=job_id,
                attempt=2,
                queue="default",
                worker="ok",
                node="n2",
                lease_token=uuid.uuid4(),
                started_at=utcnow(),
            )
        )
    assert pending(db)["wait_for"] == "run_history_settlement"
    slot = get_job(db, job_id)
    assert slot is not None and slot.state is JobState.PARKED
    assert not slot.control_pending and claim(db, queue="default", node="n1") == []


def test_wakes_and_retries_of_a_slot_being_purged_are_refused(db: Database) -> None:
    job_id, claimed = running(db)
    pending(db, actor=ME)
    with pytest.raises(ConflictError, match="being purged") as refused:
        wake_job(db, job_id)
    assert refused.value.details["purge_pending"] is True
    with db.begin() as conn:
        result = wake_multi(db, [(NS, SCOPE, KEY)], conn=conn)
    assert result.woken == [] and result.missing == []
    with pytest.raises(ConflictError, match="being purged"):
        enroll(db, demand=True)
    assert enroll(db) == job_id  # enrolling without demand finds it, as always
    assert complete(db, claimed)
    slot = get_job(db, job_id)
    assert slot is not None and slot.state is JobState.PARKED and not slot.demand_pending
    with pytest.raises(ConflictError, match="being purged"):
        retry_job(db, job_id, ME, utcnow())
    assert withdraw_purge(db, **IDENTITY, actor=ME)
    assert not withdraw_purge(db, **IDENTITY)
    assert wake_job(db, job_id).state is JobState.AVAILABLE  # the slot is kept and woken
    assert [e.action for e in list_audit(db, action="purge_withdraw").entries] == ["purge_withdraw"]


def test_the_request_is_visible_until_the_purge_is_done(db: Database) -> None:
    job_id, claimed = running(db)
    before = utcnow()
    pending(db, actor=ME)
    (info,) = list_slots(db)
    assert info.purge is not None and info.purge.requested_by == "tester@testhost"
    assert info.purge.requested_at is not None and info.purge.requested_at >= before
    slot = get_job(db, job_id)
    assert slot is not None and purge_request(slot.meta) == info.purge
    reasons = explain(db, job_id, now=utcnow()).reasons
    assert reasons[0].code == "purge_pending"
    assert "purge pending since" in reasons[0].message
    assert "by tester@testhost" in reasons[0].message
    pending(db)  # a later call keeps the first request's time and author
    (again,) = list_slots(db)
    assert again.purge == info.purge
    assert complete(db, claimed)
    assert purge_slot(db, **IDENTITY) == 1
    assert list_slots(db) == []


def test_the_lifeline_parks_a_rescued_slot_that_is_being_purged(db: Database) -> None:
    job_id, claimed = running(db)
    pending(db)
    rescued = rescue_expired(db, claimed.lease_expires_at + timedelta(seconds=1))
    assert rescued.job_ids == [job_id]
    slot = get_job(db, job_id)
    assert slot is not None and slot.state is JobState.PARKED
    assert purge_slot(db, **IDENTITY) == 1


def test_a_purge_run_to_its_end_leaves_one_audit_row(db: Database) -> None:
    job_id, claimed = running(db)
    seen: list[PurgeProgress] = []
    waits: list[float] = []

    def the_run_ends_while_we_wait(seconds: float) -> bool:
        waits.append(seconds)
        if len(waits) == 3:
            assert complete(db, claimed)
        return False

    done = purge_until_done(
        db,
        **IDENTITY,
        actor=ME,
        wait=the_run_ends_while_we_wait,
        poll_seconds=0.01,
        on_progress=seen.append,
    )
    assert done.outcome == "removed" and get_job(db, job_id) is None
    assert len(waits) == 3 and [p.calls for p in seen] == [1, 2, 3, 4]
    assert [p.wait_for for p in seen[:3]] == ["lease_release"] * 3 and seen[3].removed
    (entry,) = list_audit(db, action="purge_slot").entries
    assert entry.details == {
        "outcome": "removed",
        "removed": 1,
        "runs_deleted": 1,
        "calls": 4,
        "until_done": True,
    }
    assert (entry.actor, entry.target) == ("tester", f"{NS}/{SCOPE}/{KEY}")


@pytest.mark.parametrize("how", ["stopped", "timed_out", "interrupted"])
def test_a_purge_that_ends_early_stays_pending_and_says_how_it_ended(
    db: Database, how: str
) -> None:
    job_id, _ = running(db)

    def wait(seconds: float) -> bool:
        if how == "interrupted":
            raise KeyboardInterrupt
        return how == "stopped"

    def run() -> Any:
        return purge_until_done(
            db,
            **IDENTITY,
            actor=ME,
            wait=wait,
            poll_seconds=0.01,
            timeout_seconds=0 if how == "timed_out" else None,
        )

    if how == "interrupted":
        with pytest.raises(KeyboardInterrupt):
            run()
    else:
        assert run().outcome == how
    (entry,) = list_audit(db, action="purge_slot").entries
    assert entry.details["outcome"] == how and entry.details["cleanup_pending"] is True
    assert entry.details["wait_for"] == "lease_release" and entry.details["calls"] == 1
    (info,) = list_slots(db)
    assert info.job_id == job_id and info.purge is not None


@pytest.mark.parametrize("ending", ["fail", "snooze"])
def test_a_run_that_fails_or_snoozes_after_a_purge_request_parks_the_slot(
    db: Database, ending: str
) -> None:
    # The request arrives after the claim: the outcome, computed from the job as claimed,
    # knows nothing of it. It must still neither retry nor reschedule the slot, nor drop the
    # request from meta.
    job_id, claimed = running(db)
    assert pending(db, actor=ME)["wait_for"] == "lease_release"
    if ending == "fail":
        assert fail(db, claimed, "boom")
    else:
        result = ExecutionResult(ResultKind.SNOOZE, utcnow(), 5, snooze=timedelta(seconds=1))
        assert job_id in record(db, [(claimed, result)])
    slot = get_job(db, job_id)
    assert slot is not None and slot.state is JobState.PARKED
    assert purge_request(slot.meta) is not None
    assert claim(db, queue="default", node="n1", now=utcnow() + timedelta(hours=2)) == []
    assert purge_slot(db, **IDENTITY) == 1 and get_job(db, job_id) is None
