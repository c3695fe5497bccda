"""Claims follow one order, and a key at its limit never holds back another key.

The kickside seed: claims enforce a group's global limit and each key's limit, and a key at its
limit must not hold back other keys. The oban seed: fetch orders by priority, scheduled_at, id,
whatever else a job carries.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from kickside_engine import (
    CapacityDeclaration,
    Database,
    Job,
    JobBuilder,
    WorkerSpec,
    claim,
    complete,
    enqueue_fanout,
    enqueue_many,
    get_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.control.explain import explain
from kickside_engine.store.keyed_claims import due_keyed_job_waits
from kickside_engine.store.settings import set_setting

GROUP = CapacityDeclaration(group="stripe", settings_namespace="stripe")


def _noop(args: dict[str, Any], job: Job) -> None:
    return None


capped = WorkerSpec(name="charge", perform=_noop, capacity=GROUP)


def _limits(db: Database, global_limit: int, per_key: int) -> None:
    set_setting(db, "stripe", "global_limit", global_limit)
    set_setting(db, "stripe", "concurrency_key_limit", per_key)


def _keyed(key: str, i: int = 0, *, grouped: bool) -> JobBuilder:
    if grouped:
        return JobBuilder.for_worker(capped, {"i": i}).concurrency_key(key)
    return JobBuilder("sync", {"i": i}).concurrency_key(key)


def _keys(claimed: list[Any]) -> list[str | None]:
    return [c.job.concurrency_key for c in claimed]


@pytest.mark.parametrize("grouped", [True, False], ids=["capacity-group", "single-flight"])
def test_one_keys_backlog_never_starves_another_key(db: Database, grouped: bool) -> None:
    _limits(db, global_limit=3, per_key=1)
    enqueue_many(db, [_keyed("a", i, grouped=grouped) for i in range(250)])
    enqueue_many(db, [_keyed("b", grouped=grouped)])
    first = claim(db, queue="default", node="n1", limit=3)
    assert sorted(_keys(first)) == ["a", "b"]  # a's head and b's job, in one claim
    # Nothing else is admissible while both keys run; a's backlog stays put.
    assert claim(db, queue="default", node="n1", limit=3) == []
    a_job = next(c for c in first if c.job.concurrency_key == "a")
    assert complete(db, a_job)
    assert _keys(claim(db, queue="default", node="n1", limit=3)) == ["a"]


@pytest.mark.slow
@pytest.mark.parametrize("grouped", [True, False], ids=["capacity-group", "single-flight"])
def test_a_100000_job_key_beside_1000_keys_costs_one_claim(db: Database, grouped: bool) -> None:
    _limits(db, global_limit=5_000, per_key=1)
    template = (
        JobBuilder.for_worker(capped).concurrency_key("a")
        if grouped
        else JobBuilder("sync").concurrency_key("a")
    )
    enqueue_fanout(db, template, [{"i": i} for i in range(100_000)])
    enqueue_many(db, [_keyed(f"k{i:04}", i, grouped=grouped) for i in range(1_000)])
    claimed = claim(db, queue="default", node="n1", limit=2_000)
    keys = _keys(claimed)
    assert len(claimed) == 1_001 and keys.count("a") == 1
    assert sorted(k for k in keys if k != "a") == [f"k{i:04}" for i in range(1_000)]
    # A job left waiting says which limit holds it.
    waiting = enqueue_many(db, [_keyed("a", -1, grouped=grouped)])[0]
    reasons = {r.code: r.message for r in explain(db, waiting.id, now=utcnow()).reasons}
    code = "concurrency_key_saturated" if grouped else "concurrency_key_busy"
    assert code in reasons and "'a'" in reasons[code]


def test_a_full_group_never_holds_back_another_group_or_keyless_jobs(db: Database) -> None:
    _limits(db, global_limit=1, per_key=1)
    other = WorkerSpec(
        name="mail",
        perform=_noop,
        capacity=CapacityDeclaration(group="mail", settings_namespace="mail"),
    )
    set_setting(db, "mail", "global_limit", 2)
    set_setting(db, "mail", "concurrency_key_limit", 2)
    enqueue_many(db, [_keyed(f"s{i}", i, grouped=True) for i in range(100)])
    enqueue_many(db, [JobBuilder.for_worker(other, {}).concurrency_key("m")] * 2)
    enqueue_many(db, [JobBuilder("plain", {})])
    claimed = claim(db, queue="default", node="n1", limit=10)
    assert [c.job.worker for c in claimed] == ["charge", "mail", "mail", "plain"]


def test_invalid_group_settings_hold_back_only_that_group(db: Database) -> None:
    set_setting(db, "stripe", "global_limit", "three")
    set_setting(db, "stripe", "concurrency_key_limit", 1)
    enqueue_many(db, [_keyed(f"s{i}", i, grouped=True) for i in range(100)])
    enqueue_many(db, [JobBuilder("plain", {})])
    assert [c.job.worker for c in claim(db, queue="default", node="n1", limit=5)] == ["plain"]


def test_a_keyed_job_keeps_its_priority_over_keyless_jobs(db: Database) -> None:
    enqueue_many(db, [JobBuilder("plain", {"i": i}).priority(9) for i in range(5)])
    urgent = enqueue_many(db, [JobBuilder("sync", {}).priority(0).concurrency_key("acct-1")])[0]
    (first,) = claim(db, queue="default", node="n1", limit=1)
    assert first.job.id == urgent.id


def test_claims_follow_one_order_across_keyed_and_keyless_jobs(db: Database) -> None:
    _limits(db, global_limit=100, per_key=100)
    base = utcnow() - timedelta(minutes=10)
    builders = []
    for i in range(40):
        builder = (
            JobBuilder("plain", {"i": i})
            .priority(i % 3)
            .schedule_at(base + timedelta(seconds=i % 7))
        )
        if i % 4 == 1:
            builder = builder.concurrency_key(f"sf{i}")
        elif i % 4 == 2:
            builder = JobBuilder.for_worker(capped, {"i": i}).concurrency_key(f"g{i}")
            builder = builder.priority(i % 3).schedule_at(base + timedelta(seconds=i % 7))
        builders.append(builder)
    jobs = [get_job(db, i.id) for i in enqueue_many(db, builders)]
    expected = sorted(jobs, key=lambda j: (j.priority, j.scheduled_at, j.id))  # type: ignore[union-attr]
    order = []
    for _ in range(40):
        (claimed,) = claim(db, queue="default", node="n1", limit=1)
        order.append(claimed.job.id)
    assert order == [j.id for j in expected if j is not None]


def test_a_batch_claim_is_the_head_of_that_order(db: Database) -> None:
    # Keyed jobs at the head of the queue, keyless behind them: a batch takes both, in order.
    enqueue_many(
        db, [JobBuilder("sync", {}).priority(0).concurrency_key(f"k{i}") for i in range(3)]
    )
    enqueue_many(db, [JobBuilder("plain", {"i": i}).priority(5) for i in range(10)])
    claimed = claim(db, queue="default", node="n1", limit=5)
    assert [c.job.priority for c in claimed] == [0, 0, 0, 5, 5]


def test_the_pools_check_for_a_waiting_keyed_job_sees_only_due_available_keyed_jobs(
    db: Database,
) -> None:
    """Before its admission claim, the pool asks whether any keyed job is due at all: it must
    see every one of them (of its workers, in its queue) and nothing else."""
    now = utcnow()

    def waits(queue: str = "default", workers: list[str] | None = None) -> bool:
        with db.begin() as conn:
            return due_keyed_job_waits(db, conn, queue=queue, now=utcnow(), workers=workers)

    enqueue_many(db, [JobBuilder("sync", {}), JobBuilder("sync", {}).queue("other")])
    later = (
        JobBuilder("sync", {"later": 1}).concurrency_key("k").schedule_at(now + timedelta(hours=1))
    )
    enqueue_many(db, [later, JobBuilder("sync", {}).queue("other").concurrency_key("k")])
    assert not waits()  # keyless jobs, a keyed job not due yet, one in another queue
    enqueue_many(db, [JobBuilder("sync", {"i": 2}).concurrency_key("k")])
    assert waits() and waits(workers=["sync", "other"])
    assert not waits(workers=["charge"])  # not a worker this pool has
    claimed = claim(db, queue="default", node="n", limit=10)
    assert len(claimed) == 2  # the keyless job and the due keyed one
    assert not waits()  # executing is not waiting
