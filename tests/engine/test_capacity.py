"""Worker capacity declarations, on both backends: a Settings-backed global limit and a limit
per concurrency key, read at every claim; single-flight keys for workers without one.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    CapacityDeclaration,
    ClaimedJob,
    Database,
    InvalidArgumentError,
    Job,
    JobBuilder,
    JobState,
    WorkerSpec,
    claim,
    complete,
    enqueue,
    get_job,
)
from kickside_engine.store.settings import delete_setting, set_setting

GROUP = "app.capacity"
CAPACITY = CapacityDeclaration(
    group=GROUP,
    settings_namespace="app.capacity",
    global_limit_key="global_limit",
    concurrency_key_limit_key="concurrency_key_limit",
)


def _noop(args: dict[str, Any], job: Job) -> None:
    return None


sync_a = WorkerSpec(name="sync_a", perform=_noop, queue="sync", capacity=CAPACITY)
sync_b = WorkerSpec(name="sync_b", perform=_noop, queue="sync", capacity=CAPACITY)


def limits(db: Database, global_limit: Any, per_key: Any) -> None:
    set_setting(db, "app.capacity", "global_limit", global_limit)
    set_setting(db, "app.capacity", "concurrency_key_limit", per_key)


def job_for(db: Database, key: str, spec: WorkerSpec = sync_a) -> uuid.UUID:
    return JobBuilder.for_worker(spec, {"key": key}).concurrency_key(key).insert(db).id


def claim_all(db: Database) -> list[ClaimedJob]:
    return claim(db, queue="sync", node="n1", limit=50)


def keys(claimed: list[ClaimedJob]) -> list[str]:
    return sorted(str(c.job.concurrency_key) for c in claimed)


def test_jobs_of_a_declared_worker_need_a_concurrency_key(db: Database) -> None:
    with pytest.raises(InvalidArgumentError, match="concurrency_key"):
        JobBuilder.for_worker(sync_a, {}).insert(db)
    with pytest.raises(InvalidArgumentError, match="concurrency_key"):
        JobBuilder.for_worker(sync_a, {}).concurrency_key("").insert(db)
    with db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar() == 0
    stored = get_job(db, job_for(db, "k"))
    assert stored is not None and stored.capacity_group == GROUP
    assert stored.meta["capacity"]["settings_namespace"] == "app.capacity"


def test_claims_enforce_the_global_and_the_per_key_limit(db: Database) -> None:
    limits(db, 3, 1)
    for key in ("a", "a", "b", "c", "d", "e"):
        job_for(db, key)
    first = claim_all(db)
    assert keys(first) == ["a", "b", "c"]  # claim order, one per key, three in all
    assert claim_all(db) == []
    assert complete(db, next(c for c in first if c.job.concurrency_key == "a"))
    assert keys(claim_all(db)) == ["a"]  # the second "a" was next in line


def test_workers_declaring_the_same_group_share_its_limits(db: Database) -> None:
    limits(db, 2, 2)
    for spec in (sync_a, sync_b):
        job_for(db, "x", spec)
        job_for(db, "y", spec)
    claimed = claim_all(db)
    assert len(claimed) == 2 and {c.job.worker for c in claimed} == {"sync_a"}


def test_a_per_key_limit_above_one_admits_that_many_per_key(db: Database) -> None:
    limits(db, 10, 2)
    for _ in range(3):
        job_for(db, "k")
    assert keys(claim_all(db)) == ["k", "k"]


def test_a_changed_limit_takes_effect_on_the_next_claim(db: Database) -> None:
    limits(db, 3, 1)
    for key in "abcdef":
        job_for(db, key)
    running = claim_all(db)
    assert len(running) == 3
    set_setting(db, "app.capacity", "global_limit", 1)
    assert complete(db, running.pop())
    assert claim_all(db) == []  # two still run, above the new limit of one
    for claimed in running:
        assert complete(db, claimed)
    assert len(claim_all(db)) == 1
    set_setting(db, "app.capacity", "global_limit", 0)  # zero admits nothing new
    assert claim_all(db) == []
    set_setting(db, "app.capacity", "global_limit", 10)
    assert len(claim_all(db)) == 2


@pytest.mark.parametrize(
    ("global_limit", "per_key"),
    [("three", 1), (3, "one"), (-1, 1), (3, -1), (True, 1), (2.5, 1), (None, 1), ({"n": 3}, 1)],
)
def test_invalid_settings_refuse_admission(db: Database, global_limit: Any, per_key: Any) -> None:
    limits(db, global_limit, per_key)
    job_for(db, "a")
    plain = enqueue(db, JobBuilder("ok", {}).queue("sync")).id  # not in the group: unaffected
    assert [c.job.id for c in claim_all(db)] == [plain]
    limits(db, 3, 1)
    assert keys(claim_all(db)) == ["a"]


@pytest.mark.parametrize("missing", ["global_limit", "concurrency_key_limit"])
def test_missing_settings_refuse_admission(db: Database, missing: str) -> None:
    limits(db, 3, 1)
    delete_setting(db, "app.capacity", missing)
    job_for(db, "a")
    assert claim_all(db) == []
    assert get_job(db, job_for(db, "b")).state is JobState.AVAILABLE  # type: ignore[union-attr]


def test_without_a_declaration_a_concurrency_key_is_single_flight(db: Database) -> None:
    first = enqueue(db, JobBuilder("ok", {"n": 1}).queue("sync").concurrency_key("k")).id
    second = enqueue(db, JobBuilder("ok", {"n": 2}).queue("sync").concurrency_key("k")).id
    other = enqueue(db, JobBuilder("ok", {"n": 3}).queue("sync").concurrency_key("j")).id
    claimed = claim_all(db)
    assert sorted(c.job.id for c in claimed) == sorted([first, other])
    assert claim_all(db) == []  # no settings are involved without a declaration
    assert complete(db, next(c for c in claimed if c.job.id == first))
    assert [c.job.id for c in claim_all(db)] == [second]


def test_slot_jobs_of_a_declared_worker_obey_the_group(db: Database) -> None:
    limits(db, 1, 1)
    for key in ("s1", "s2"):
        JobBuilder.for_worker(sync_a, {}).slot("app", "t", key, demand=True).concurrency_key(
            key
        ).insert(db)
    (running,) = claim_all(db)
    assert running.job.is_slot and claim_all(db) == []
    assert complete(db, running)
    assert len(claim_all(db)) == 1
