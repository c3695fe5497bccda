"""explain, metrics, capacity overview and doctor: the operator's questions, answered."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kickside_engine import (
    CapacityDeclaration,
    Database,
    InvalidArgumentError,
    JobBuilder,
    NotFoundError,
    claim,
    enqueue,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, list_audit, pause_queue
from kickside_engine.control.capacity import (
    capacity_groups,
    capacity_namespaces,
    set_capacity,
    stops_work,
)
from kickside_engine.control.explain import explain
from kickside_engine.control.health import doctor
from kickside_engine.control.metrics import overview, percentiles, queue_metrics, throughput
from kickside_engine.store.nodes import NodeBeat, heartbeat
from kickside_engine.store.settings import get_settings, set_setting
from kickside_engine.testing import drain_jobs

from ..support.workers import registry

ACTOR = Actor("ops", "laptop")
GROUP = CapacityDeclaration("exports", "app.capacity")


def _codes(db: Database, job_id: object) -> list[str]:
    return [r.code for r in explain(db, job_id, now=utcnow()).reasons]  # type: ignore[arg-type]


def _node(db: Database, queues: dict[str, int], name: str = "n1", age: float = 0) -> None:
    now = utcnow()
    heartbeat(
        db,
        NodeBeat(name, "host", 1, queues, "v1", 0, sum(queues.values()), now),
        now - timedelta(seconds=age),
    )


def test_explain_says_why_a_job_waits(db: Database) -> None:
    later = enqueue(db, JobBuilder("ok").schedule_in(timedelta(hours=1)))
    assert "scheduled_in_future" in _codes(db, later.id)
    due = enqueue(db, JobBuilder("ok"))
    assert _codes(db, due.id) == ["no_live_node"]
    _node(db, {"default": 1})
    assert _codes(db, due.id) == ["waiting_to_be_claimed"]
    pause_queue(db, "default", ACTOR, utcnow())
    assert "queue_paused" in _codes(db, due.id)
    reason = next(r for r in explain(db, due.id, now=utcnow()).reasons if r.code == "queue_paused")
    assert "ops" in reason.message


def test_explain_executing_retry_and_stale_lease(db: Database) -> None:
    failing = enqueue(db, JobBuilder("fail"))
    drain_jobs(db, registry)
    assert _codes(db, failing.id)[0] == "retry_backoff"
    running = enqueue(db, JobBuilder("ok"))
    claim(db, queue="default", node="gone-node")
    codes = _codes(db, running.id)
    assert codes[0] == "executing" and "lease_held_by_stale_node" in codes


def test_explain_single_flight_and_capacity(db: Database) -> None:
    _node(db, {"default": 10})
    first = enqueue(db, JobBuilder("ok").concurrency_key("acct-1"))
    second = enqueue(db, JobBuilder("ok").concurrency_key("acct-1"))
    claimed = claim(db, queue="default", node="n1", limit=5)
    assert [c.job.id for c in claimed] == [first.id]
    assert "concurrency_key_busy" in _codes(db, second.id)
    capped = JobBuilder("ok", capacity=GROUP).queue("exports").concurrency_key("k1")
    job = enqueue(db, capped)
    assert "capacity_settings_invalid" in _codes(db, job.id)
    set_capacity(db, "app.capacity", global_limit=0, per_key_limit=1, actor=ACTOR, now=utcnow())
    assert "capacity_saturated" in _codes(db, job.id)


def test_explain_rejects_bad_ids(db: Database) -> None:
    with pytest.raises(InvalidArgumentError):
        explain(db, "not-a-uuid", now=utcnow())
    with pytest.raises(NotFoundError):
        explain(db, "00000000-0000-0000-0000-000000000000", now=utcnow())


def test_capacity_groups_show_limits_usage_and_waiting_reasons(db: Database) -> None:
    for key in ("a", "a", "b"):
        enqueue(db, JobBuilder("ok", capacity=GROUP).queue("exports").concurrency_key(key))
    (group,) = capacity_groups(db, utcnow())
    assert group.group == "exports" and group.problem and group.waiting == 3
    assert all(w.reason.startswith("capacity settings invalid") for w in group.waiting_jobs)
    set_capacity(db, "app.capacity", global_limit=2, per_key_limit=1, actor=ACTOR, now=utcnow())
    claim(db, queue="exports", node="n1", limit=5)
    (group,) = capacity_groups(db, utcnow())
    assert (group.global_limit, group.per_key_limit, group.executing) == (2, 1, 2)
    assert group.per_key == {"a": 1, "b": 1}
    assert group.waiting == 1 and "reached" in group.waiting_jobs[0].reason
    assert list_audit(db, action="capacity_set").entries[0].target == "app.capacity"
    with pytest.raises(InvalidArgumentError):
        set_capacity(
            db, "app.capacity", global_limit=-1, per_key_limit=1, actor=ACTOR, now=utcnow()
        )
    set_setting(db, "app.capacity", "global_limit", "three")
    assert "invalid" in (capacity_groups(db, utcnow())[0].problem or "")


def test_set_capacity_refuses_a_namespace_nothing_uses_unless_create(db: Database) -> None:
    enqueue(db, JobBuilder("ok", capacity=GROUP).queue("exports").concurrency_key("k"))
    set_setting(db, "other.limits", "global_limit", 1)  # settings exist under it
    assert capacity_namespaces(db) == ["app.capacity", "other.limits"]
    with pytest.raises(NotFoundError, match=r"known namespaces: app\.capacity, other\.limits"):
        set_capacity(
            db, "app.capacityy", global_limit=2, per_key_limit=1, actor=ACTOR, now=utcnow()
        )
    assert get_settings(db, "app.capacityy") == [] and list_audit(db).entries == []
    for known in ("app.capacity", "other.limits"):
        set_capacity(db, known, global_limit=2, per_key_limit=1, actor=ACTOR, now=utcnow())
    set_capacity(
        db, "new.group", global_limit=2, per_key_limit=1, actor=ACTOR, now=utcnow(), create=True
    )
    assert "new.group" in capacity_namespaces(db)
    assert stops_work(0, 1) and stops_work(3, 0) and not stops_work(1, 1)


def test_metrics_from_history(db: Database) -> None:
    for i in range(5):
        enqueue(db, JobBuilder("ok" if i < 4 else "fail").queue("metrics"))
    drain_jobs(db, registry)
    enqueue(db, JobBuilder("ok").queue("metrics"))
    now = utcnow() + timedelta(seconds=1)
    (m,) = queue_metrics(db, now, window=timedelta(minutes=5))
    assert m.queue == "metrics" and len(m.buckets) == 5
    assert sum(b.completed for b in m.buckets) == 4 and sum(b.failed for b in m.buckets) == 1
    assert m.run_time.samples == 5 and m.queue_time.p50 is not None
    assert m.backlog == 1 and m.backlog_age_seconds is not None
    per_worker = throughput(db, now, window=timedelta(minutes=5), by="worker")
    assert sum(b.completed for b in per_worker["ok"]) == 4
    assert sum(b.failed for b in per_worker["fail"]) == 1
    ov = overview(db, now)
    assert ov.completed_last_minute == 4 and ov.failed_last_minute == 1
    assert ov.queues_without_node == ["metrics"]


def test_percentiles_nearest_rank() -> None:
    p = percentiles([float(v) for v in range(1, 101)])
    assert (p.p50, p.p95, p.p99, p.samples) == (50, 95, 99, 100)
    assert percentiles([]).p50 is None


def test_doctor_finds_what_needs_attention(db: Database) -> None:
    report = doctor(db, utcnow())
    assert report.ok, report.findings
    enqueue(db, JobBuilder("ok", capacity=GROUP).concurrency_key("k"))
    enqueue(db, JobBuilder("ok").max_execution(timedelta(seconds=1)))
    claim(db, queue="default", node="n1", limit=5, lease=timedelta(seconds=5))
    _node(db, {"other": 1}, name="old", age=120)
    later = utcnow() + timedelta(minutes=1)
    statuses = {f.check: f.status for f in doctor(db, later).findings}
    assert statuses["nodes"] == "warn" and statuses["leases"] == "warn"
    assert statuses["queues"] == "warn" and statuses["capacity"] == "fail"
    assert statuses["stuck"] == "warn" and statuses["schema"] == "ok"
    assert not doctor(db, later).ok
    if db.is_postgresql:
        assert statuses["notify"] == "ok"


def test_doctor_on_an_empty_database_says_migrate(empty_db: Database) -> None:
    report = doctor(empty_db, utcnow())
    assert [f.status for f in report.findings] == ["fail"]
    assert "kickside migrate" in report.findings[0].message
