"""Purging a retired slot with its settled history, on both backends: pages of at most 100
settled runs, a continuation contract while work remains, and nothing running ever deleted.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    ClaimedJob,
    ConflictError,
    Database,
    InvalidArgumentError,
    JobBuilder,
    RunOutcome,
    claim,
    complete,
    enqueue,
    get_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, list_audit
from kickside_engine.purge import RUNS_PER_CALL, PurgeResult
from kickside_engine.slots import purge_slot
from kickside_engine.store.settle import settle_open_run

NS, SCOPE = "app.sync", "tenant:1"
IDENTITY: dict[str, Any] = {"namespace": NS, "scope": SCOPE, "key": "k1"}
ME = Actor("tester", "testhost")


def enroll(db: Database, key: str = "k1") -> uuid.UUID:
    return enqueue(db, JobBuilder("ok", {}).slot(NS, SCOPE, key)).id


def claim_one(db: Database) -> ClaimedJob:
    (claimed,) = claim(db, queue="default", node="n1")
    return claimed


def add_settled_runs(db: Database, job_id: uuid.UUID, count: int) -> None:
    """History as ``count`` finished runs would leave it (written directly, for speed)."""
    start = utcnow() - timedelta(days=1)
    with db.begin() as conn:
        conn.execute(
            sa.insert(db.tables.job_run),
            [
                {
                    "job_id": job_id,
                    "attempt": 1,
                    "queue": "default",
                    "worker": "ok",
                    "node": "n1",
                    "lease_token": uuid.uuid4(),
                    "started_at": start + timedelta(seconds=i),
                    "finished_at": start + timedelta(seconds=i, milliseconds=5),
                    "duration_ms": 5,
                    "outcome": RunOutcome.COMPLETED.value,
                }
                for i in range(count)
            ],
        )


def run_ids(db: Database, job_id: uuid.UUID) -> list[int]:
    run = db.tables.job_run
    with db.read() as conn:
        return list(
            conn.execute(
                sa.select(run.c.id).where(run.c.job_id == job_id).order_by(run.c.id)
            ).scalars()
        )


def purge(db: Database, *, now: datetime | None = None) -> PurgeResult:
    return purge_slot(db, namespace=NS, scope=SCOPE, key="k1", now=now)


def purge_conflict(db: Database) -> dict[str, object]:
    with pytest.raises(ConflictError) as raised:
        purge(db)
    assert raised.value.exit_code == 4
    return raised.value.details


def test_a_slot_with_250_settled_runs_is_purged_in_three_calls(db: Database) -> None:
    job_id = enroll(db)
    assert complete(db, claim_one(db))
    add_settled_runs(db, job_id, 249)
    ids = run_ids(db, job_id)
    assert len(ids) == 250 and RUNS_PER_CALL == 100
    first = purge_conflict(db)
    assert first == {
        "cleanup_pending": True,
        "needs_continue": True,
        "runs_deleted": 100,
        "job_id": str(job_id),
    }
    assert run_ids(db, job_id) == ids[100:]  # oldest first, and the page is committed
    assert purge_conflict(db)["runs_deleted"] == 100
    last = purge(db)
    assert last == 1 and last.removed and last.runs_deleted == 50  # the final page counts too
    assert get_job(db, job_id) is None and run_ids(db, job_id) == []
    gone = purge(db)
    assert gone == 0 and not gone.removed and gone.runs_deleted == 0


def test_the_final_call_reports_its_runs_and_audits_them(db: Database) -> None:
    job_id = enroll(db)
    add_settled_runs(db, job_id, RUNS_PER_CALL + 5)
    with pytest.raises(ConflictError) as pending:
        purge_slot(db, **IDENTITY, actor=ME)
    result = purge_slot(db, **IDENTITY, actor=ME)
    assert isinstance(result, PurgeResult) and isinstance(result, int)
    assert pending.value.details["runs_deleted"] + result.runs_deleted == RUNS_PER_CALL + 5
    assert result == 1 and result.runs_deleted == 5 and json.dumps(result) == "1"
    assert repr(result) == "PurgeResult(removed=True, runs_deleted=5)"
    last = list_audit(db, action="purge_slot").entries[0]  # newest first
    assert last.details == {"outcome": "removed", "removed": 1, "runs_deleted": 5}


def test_an_absent_slot_purges_to_zero(db: Database) -> None:
    assert purge_slot(db, namespace=NS, scope=SCOPE, key="never") == 0
    oneshot = enqueue(db, JobBuilder("ok", {}).identity(NS, SCOPE, "k1")).id
    assert purge(db) == 0  # a one-shot job is not a slot: left alone
    assert get_job(db, oneshot) is not None


def test_a_slot_without_history_is_removed_at_once(db: Database) -> None:
    job_id = enroll(db)
    assert purge(db) == 1
    assert get_job(db, job_id) is None


def test_a_running_slot_waits_for_its_lease_release(db: Database) -> None:
    job_id = enroll(db)
    add_settled_runs(db, job_id, 30)
    claimed = claim_one(db)
    details = purge_conflict(db)
    assert details["wait_for"] == "lease_release" and details["runs_deleted"] == 30
    assert details["cleanup_pending"] is True and "needs_continue" not in details
    assert len(run_ids(db, job_id)) == 1  # the running attempt's history is kept
    assert purge_conflict(db)["wait_for"] == "lease_release"
    assert complete(db, claimed)
    done = purge(db)
    assert done == 1 and done.runs_deleted == 1  # the attempt that was running, now settled
    assert get_job(db, job_id) is None


def test_an_expired_lease_still_waits_for_its_release(db: Database) -> None:
    enroll(db)
    claimed = claim_one(db)
    later = claimed.lease_expires_at + timedelta(hours=1)
    with pytest.raises(ConflictError) as raised:  # still executing until the Lifeline rescues it
        purge(db, now=later)
    assert raised.value.details["wait_for"] == "lease_release"


def test_unsettled_history_without_a_lease_waits_for_settlement(db: Database) -> None:
    job_id = enroll(db)
    claimed = claim_one(db)
    with db.begin() as conn:  # the job left executing while its run stayed open
        conn.execute(
            sa.update(db.tables.job)
            .where(db.tables.job.c.id == job_id)
            .values(state="parked", lease_token=None, lease_expires_at=None)
        )
    details = purge_conflict(db)
    assert details["wait_for"] == "run_history_settlement" and details["runs_deleted"] == 0
    assert len(run_ids(db, job_id)) == 1
    with db.begin() as conn:
        settle_open_run(
            db, conn, lease_token=claimed.lease_token, outcome=RunOutcome.RESCUED, now=utcnow()
        )
    assert purge(db) == 1


def test_more_settled_history_is_paged_before_waiting_on_a_lease(db: Database) -> None:
    job_id = enroll(db)
    add_settled_runs(db, job_id, 150)
    claimed = claim_one(db)
    assert purge_conflict(db)["needs_continue"] is True
    details = purge_conflict(db)
    assert details["wait_for"] == "lease_release" and details["runs_deleted"] == 50
    assert complete(db, claimed)
    assert purge(db) == 1


def test_purge_only_touches_the_exact_identity(db: Database) -> None:
    other = enroll(db, "k2")
    add_settled_runs(db, other, 5)
    enroll(db, "k1")
    assert purge(db) == 1
    assert get_job(db, other) is not None and len(run_ids(db, other)) == 5


@pytest.mark.parametrize("field", ["namespace", "scope", "key"])
@pytest.mark.parametrize("bad", ["", "   ", None, 7])
def test_identity_parts_are_required_non_empty_strings(
    db: Database, field: str, bad: object
) -> None:
    enroll(db)
    with pytest.raises(InvalidArgumentError, match=field):
        purge_slot(db, **{**IDENTITY, field: bad})
    assert purge(db) == 1
