"""The consistency checks find each impossible state, and `doctor` reports them.

Each case forges one impossible state with raw SQL (the engine never produces them) and checks
that exactly that check finds exactly that job. States the schema's CHECK constraints already
forbid are forged with those constraints switched off, as a host's own schema might lack them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from sqlalchemy import Connection, insert, text, update

from kickside_engine import Database, JobBuilder, claim, enqueue
from kickside_engine.clock import utcnow
from kickside_engine.control.consistency import CHECKS, find_inconsistencies
from kickside_engine.control.health import doctor


def _available(db: Database) -> uuid.UUID:
    return enqueue(db, JobBuilder("ok", {})).id


def _executing(db: Database) -> uuid.UUID:
    job_id = _available(db)
    (claimed,) = claim(db, queue="default", node="n1")
    assert claimed.job.id == job_id
    return job_id


def _set(db: Database, conn: Connection, job_id: uuid.UUID, **values: object) -> None:
    job = db.tables.job
    conn.execute(update(job).where(job.c.id == job_id).values(**values))


def _open_run(db: Database, conn: Connection, job_id: uuid.UUID) -> None:
    conn.execute(
        insert(db.tables.job_run).values(
            job_id=job_id,
            attempt=1,
            queue="default",
            worker="ok",
            node="ghost",
            lease_token=uuid.uuid4(),
            started_at=utcnow(),
        )
    )


def _settle_runs(db: Database, conn: Connection, job_id: uuid.UUID) -> None:
    run = db.tables.job_run
    conn.execute(
        update(run).where(run.c.job_id == job_id).values(finished_at=utcnow(), outcome="completed")
    )


def _unchecked(db: Database, conn: Connection) -> None:
    """Switch the job table's CHECK constraints off for this connection (or this schema)."""
    if db.is_sqlite:
        conn.execute(text("PRAGMA ignore_check_constraints = ON"))
    else:
        for name in ("slot_identity", "slot_state"):
            conn.execute(
                text(f"ALTER TABLE {db.tables.job.fullname} DROP CONSTRAINT ck_kickside_job_{name}")
            )


def _park_a_one_shot(db: Database, conn: Connection, job_id: uuid.UUID) -> None:
    _unchecked(db, conn)
    _set(db, conn, job_id, state="parked")


Forge = Callable[[Database, Connection, uuid.UUID], None]
CASES: dict[str, tuple[Callable[[Database], uuid.UUID], Forge]] = {
    "executing_without_lease": (_executing, lambda d, c, j: _set(d, c, j, attempted_at=None)),
    "lease_outside_executing": (
        _available,
        lambda d, c, j: _set(d, c, j, lease_token=uuid.uuid4()),
    ),
    "executing_without_open_run": (_executing, lambda d, c, j: _settle_runs(d, c, j)),
    "open_run_without_lease": (_available, _open_run),
    "several_open_runs": (_executing, _open_run),
    "final_without_timestamps": (
        _available,
        lambda d, c, j: _set(d, c, j, state="completed", finalized_at=utcnow()),
    ),
    "attempts_exceeded": (_available, lambda d, c, j: _set(d, c, j, attempt=4, max_attempts=3)),
    "slot_shape": (_available, lambda d, c, j: _park_a_one_shot(d, c, j)),
    # A job outside any workflow set to waiting: nothing would ever release it.
    "waiting_without_upstreams": (_available, lambda d, c, j: _set(d, c, j, state="waiting")),
}


def test_every_check_has_a_case() -> None:
    assert set(CASES) == set(CHECKS)


@pytest.mark.parametrize("check", sorted(CASES))
def test_each_impossible_state_is_found(db: Database, check: str) -> None:
    enqueue(db, JobBuilder("ok", {}).queue("bystander"))  # never reported
    make, forge = CASES[check]
    job_id = make(db)
    assert find_inconsistencies(db) == []
    with db.begin() as conn:
        forge(db, conn, job_id)
    found = {f.check: f.job_ids for f in find_inconsistencies(db)}
    assert found[check] == (job_id,)
    assert set(found.values()) == {(job_id,)}  # (a second open run also lacks the lease)
    report = doctor(db, utcnow() + timedelta(seconds=1))
    finding = next(f for f in report.findings if f.check == "consistency")
    assert finding.status == "fail" and str(job_id) in finding.data[check]


def test_a_sound_database_passes(db: Database) -> None:
    _executing(db)
    _available(db)
    report = doctor(db, utcnow())
    finding = next(f for f in report.findings if f.check == "consistency")
    assert finding.status == "ok"
