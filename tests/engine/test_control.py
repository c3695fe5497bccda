"""The operator API on both backends: filters, search, paging, detail, actions, queues, nodes."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    ConflictError,
    Database,
    InvalidArgumentError,
    JobBuilder,
    JobKind,
    JobState,
    NotFoundError,
    RunOutcome,
    Unique,
    claim,
    enqueue,
    enqueue_many,
    get_job,
    record,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import (
    NODE_STALE_AFTER,
    Actor,
    JobFilter,
    cancel_job,
    count_jobs,
    delete_job,
    discard_job,
    find_queue,
    job_detail,
    list_audit,
    list_jobs,
    list_nodes,
    list_queues,
    list_runs,
    pause_queue,
    resume_job,
    resume_queue,
    retry_job,
    state_counts,
)
from kickside_engine.execution import execute
from kickside_engine.slots import disable_slot
from kickside_engine.store.leases import renew_leases
from kickside_engine.testing import drain_jobs

from ..support.workers import registry

ALICE = Actor("alice", "ops-1")


def job(worker: str, args: dict[str, Any] | None = None) -> JobBuilder:
    return JobBuilder(worker, args or {})


def ids(db: Database, flt: JobFilter) -> set[uuid.UUID]:
    return {j.id for j in list_jobs(db, flt, limit=1000).jobs}


def finished(db: Database, worker: str, args: dict[str, Any] | None = None, **kw: Any) -> uuid.UUID:
    """A job run to its end by ``worker`` (completed, discarded, ... as the worker decides)."""
    builder = job(worker, args)
    if "max_attempts" in kw:
        builder = builder.max_attempts(kw["max_attempts"])
    inserted = enqueue(db, builder.queue("finishing"))
    drain_jobs(db, registry, queue="finishing")
    return inserted.id


# --- filters, search and paging ------------------------------------------------------------


def test_filters_select_by_state_queue_worker_and_kind(db: Database) -> None:
    a = enqueue(db, job("ok").queue("mailers")).id
    b = enqueue(db, job("ok").queue("default")).id
    c = enqueue(db, job("fail").queue("default")).id
    later = enqueue(db, job("ok").schedule_in(timedelta(hours=1))).id
    (claimed,) = claim(db, queue="mailers", node="n1")
    assert claimed.job.id == a

    assert ids(db, JobFilter(states=(JobState.EXECUTING,))) == {a}
    assert ids(db, JobFilter(states=("available", "scheduled"))) == {b, c, later}  # type: ignore[arg-type]
    assert ids(db, JobFilter(queues=("default",), workers=("ok",))) == {b, later}
    assert ids(db, JobFilter(workers=("fail", "nobody"))) == {c}
    assert ids(db, JobFilter(kinds=(JobKind.ONESHOT,))) == {a, b, c, later}
    assert ids(db, JobFilter(kinds=(JobKind.SLOT,))) == set()
    assert count_jobs(db, JobFilter(queues=("default",))) == 3
    assert count_jobs(db) == 4


def test_every_tag_asked_for_must_be_present(db: Database) -> None:
    both = enqueue(db, job("ok", {"week": "w48"}).tags(["digest", "user:42"])).id
    digest = enqueue(db, job("ok").tags(["digest"])).id
    user = enqueue(db, job("ok").tags(["user:42", "50%_off"])).id
    enqueue(db, job("ok"))
    assert ids(db, JobFilter(tags=("digest", "user:42"))) == {both}
    assert ids(db, JobFilter(tags=("digest",))) == {both, digest}
    assert ids(db, JobFilter(tags=("user:42",))) == {both, user}
    assert ids(db, JobFilter(tags=("50%_off",))) == {user}
    assert ids(db, JobFilter(tags=("50%",))) == set()  # tags match whole, never as patterns
    assert count_jobs(db, JobFilter(tags=("digest",), queues=("other",))) == 0
    assert ids(db, JobFilter(tags=("digest",), search="W48")) == {both}
    assert ids(db, JobFilter(tags=("user:42",), search="w48", states=("available",))) == {both}  # type: ignore[arg-type]


def test_search_finds_non_ascii_values(db: Database) -> None:
    zurich = enqueue(db, job("ok", {"city": "Zürich", "note": "naïve café ☕"})).id
    enqueue(db, job("ok", {"city": "Zurich"}))
    assert ids(db, JobFilter(search="zürich")) == {zurich}
    assert ids(db, JobFilter(search="ZÜRICH")) == {zurich}
    assert ids(db, JobFilter(search="café ☕")) == {zurich}


def test_search_finds_values_in_args_and_in_errors_case_insensitively(db: Database) -> None:
    email = enqueue(db, job("ok", {"email": "Bob@Example.com", "n": 7})).id
    failing = enqueue(db, job("fail", {"message": "Upstream 503 from Billing"})).id
    enqueue(db, job("ok", {"email": "carol@example.org"}))
    drain_jobs(db, registry)
    assert get_job(db, failing).state is JobState.RETRYABLE  # type: ignore[union-attr]
    assert ids(db, JobFilter(search="bob@EXAMPLE.COM")) == {email}
    assert ids(db, JobFilter(search="example")) == {email} | ids(db, JobFilter(search="carol"))
    # Found in the error history too (its args carry the same text, so look for the type).
    assert ids(db, JobFilter(search="runtimeerror: upstream")) == {failing}
    # Error entries are searched by message: their keys and timestamps are not values.
    assert ids(db, JobFilter(search="attempt")) == set()
    assert ids(db, JobFilter(search="nowhere to be found")) == set()


def test_search_matches_values_not_json_fragments(db: Database) -> None:
    enqueue(db, job("ok", {"a": 1, "b": "two"}))
    assert count_jobs(db, JobFilter(search="two")) == 1
    assert count_jobs(db, JobFilter(search='": 1')) == 0
    assert count_jobs(db, JobFilter(search='1, "b')) == 0
    assert count_jobs(db, JobFilter(search='"two"')) == 0


VALUES = {
    "percent": "100% done",
    "digits": "1000 done",
    "underscore": "a_b",
    "any_char": "axb",
    "backslash": "C:\\temp",
    "no_backslash": "C:temp",
    "double_quote": 'say "hi"',
    "single_quote": "it's",
    "plain": "say hi",
}


@pytest.mark.parametrize(
    ("needle", "expected"),
    [
        ("%", {"percent"}),
        ("100%", {"percent"}),
        ("0% d", {"percent"}),
        ("_", {"underscore"}),
        ("a_b", {"underscore"}),
        ("\\", {"backslash"}),
        ("c:\\t", {"backslash"}),
        ('"', {"double_quote"}),
        ('"hi"', {"double_quote"}),
        ("'", {"single_quote"}),
        ("it's", {"single_quote"}),
        ("' OR '1'='1", set()),
        ("%_%", set()),
    ],
)
def test_search_metacharacters_match_literally(
    db: Database, needle: str, expected: set[str]
) -> None:
    by_id = {enqueue(db, job("ok", {"v": v})).id: k for k, v in VALUES.items()}
    found = {by_id[i] for i in ids(db, JobFilter(search=needle))}
    assert found == expected


def test_error_search_is_literal_too(db: Database) -> None:
    full = enqueue(db, job("fail", {"message": "disk 100% full"})).id
    enqueue(db, job("fail", {"message": "disk 1000 full"}))
    drain_jobs(db, registry)
    assert ids(db, JobFilter(search="100%", workers=("fail",))) == {full}
    assert ids(db, JobFilter(search="0%", states=(JobState.RETRYABLE,))) == {full}


def test_a_secret_stored_redacted_cannot_be_found(db: Database) -> None:
    leaky = enqueue(db, job("leaky")).id
    stored = enqueue(db, job("ok", {"password": "hunter2-secret", "user": "dave"})).id
    drain_jobs(db, registry)
    assert ids(db, JobFilter(search="not-a-password")) == set()
    assert ids(db, JobFilter(search="not-a-token")) == set()
    assert ids(db, JobFilter(search="hunter2")) == set()
    # What stays readable is still found.
    assert ids(db, JobFilter(search="api.example.com/v1/charges")) == {leaky}
    assert ids(db, JobFilter(search="dave")) == {stored}


def page_through(db: Database, flt: JobFilter, limit: int) -> list[uuid.UUID]:
    seen: list[uuid.UUID] = []
    cursor = None
    while True:
        page = list_jobs(db, flt, limit=limit, cursor=cursor)
        assert len(page.jobs) <= limit
        seen += [j.id for j in page.jobs]
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor


def test_keyset_paging_returns_every_job_exactly_once(db: Database) -> None:
    start = utcnow() - timedelta(hours=1)
    # 23 jobs share one inserted_at (a fan-out), so the id breaks the ties.
    enqueue_many(db, [job("ok", {"i": i}) for i in range(23)], now=start)
    for i in range(7):
        enqueue(db, job("ok", {"j": i}).queue("other"), now=start + timedelta(seconds=i))
    expected = sorted(
        list_jobs(db, limit=1000).jobs, key=lambda j: (j.inserted_at, j.id), reverse=True
    )
    for limit in (1, 5, 7, 30, 31):
        assert page_through(db, JobFilter(), limit) == [j.id for j in expected]
    assert len(page_through(db, JobFilter(queues=("default",)), 4)) == 23


def test_paging_is_stable_while_new_jobs_arrive(db: Database) -> None:
    start = utcnow() - timedelta(hours=1)
    old = {enqueue(db, job("ok", {"i": i}), now=start + timedelta(seconds=i)).id for i in range(12)}
    page = list_jobs(db, limit=5)
    seen = [j.id for j in page.jobs]
    for i in range(5):  # newer jobs land before the cursor, never on a later page
        enqueue(db, job("ok", {"new": i}))
    cursor = page.next_cursor
    while cursor is not None:
        page = list_jobs(db, limit=5, cursor=cursor)
        seen += [j.id for j in page.jobs]
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)) == 12 and set(seen) == old


@pytest.mark.parametrize("cursor", ["", "garbage", "YTE6MTIz", "ajE6bm90LWEtdGltZXxhYmM"])
def test_a_bad_cursor_is_an_invalid_argument(db: Database, cursor: str) -> None:
    with pytest.raises(InvalidArgumentError, match="cursor"):
        list_jobs(db, cursor=cursor)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: JobFilter(states=("running",)), "state"),  # type: ignore[arg-type]
        (lambda: JobFilter(kinds=("batch",)), "kind"),  # type: ignore[arg-type]
        (lambda: JobFilter(queues="default"), "queues"),  # type: ignore[arg-type]
        (lambda: JobFilter(tags=("",)), "tags"),
        (lambda: JobFilter(search="x\x00"), "search"),
    ],
)
def test_a_bad_filter_names_the_field(make: Any, field: str) -> None:
    with pytest.raises(InvalidArgumentError, match=field):
        make()


def test_limit_is_validated(db: Database) -> None:
    with pytest.raises(InvalidArgumentError, match="limit"):
        list_jobs(db, limit=0)


def test_state_counts_group_by_queue_and_state(db: Database) -> None:
    enqueue_many(db, [job("ok").queue("mailers") for _ in range(2)])
    assert len(claim(db, queue="mailers", node="n1", limit=2)) == 2
    enqueue(db, job("ok").queue("mailers"))
    enqueue(db, job("ok").schedule_in(timedelta(hours=1)))
    counts = state_counts(db)
    assert set(counts) == {"mailers", "default"}
    assert counts["mailers"][JobState.EXECUTING] == 2
    assert counts["mailers"][JobState.AVAILABLE] == 1
    assert counts["mailers"][JobState.COMPLETED] == 0
    assert counts["default"][JobState.SCHEDULED] == 1
    assert set(counts["default"]) == set(JobState)


def test_job_detail_has_errors_and_runs(db: Database) -> None:
    failing = enqueue(db, job("fail", {"message": "nope"}).max_attempts(2)).id
    drain_jobs(db, registry, with_scheduled=True)
    detail = job_detail(db, str(failing))
    assert detail.job.id == failing and detail.job.state is JobState.DISCARDED
    assert [e.attempt for e in detail.job.errors] == [1, 2]
    assert [r.attempt for r in detail.runs] == [1, 2]
    assert all(r.outcome is RunOutcome.FAILED for r in detail.runs)
    with pytest.raises(NotFoundError):
        job_detail(db, uuid.uuid4())
    with pytest.raises(InvalidArgumentError, match="not a UUID"):
        job_detail(db, "not-a-uuid")


# --- actions -------------------------------------------------------------------------------


def audit_of(db: Database, target: uuid.UUID | str) -> list[Any]:
    return list_audit(db, target=str(target)).entries


def test_retry_revives_a_discarded_job_with_one_more_attempt(db: Database) -> None:
    dead = finished(db, "fail", {"message": "boom"}, max_attempts=1)
    before = get_job(db, dead)
    assert before is not None and before.state is JobState.DISCARDED and before.attempt == 1
    now = utcnow()
    after = retry_job(db, dead, ALICE, now)
    assert after.state is JobState.AVAILABLE and after.scheduled_at == now
    assert after.max_attempts == 2 and after.attempt == 1 and after.errors == before.errors
    assert after.finalized_at is None and after.discarded_at is None
    (entry,) = audit_of(db, dead)
    assert (entry.actor, entry.host, entry.action, entry.target_type) == (
        "alice",
        "ops-1",
        "retry",
        "job",
    )
    assert entry.at == now and entry.details["from"] == "discarded"
    assert entry.details["to"] == "available"
    drain_jobs(db, registry, queue="finishing")
    assert get_job(db, dead).attempt == 2  # type: ignore[union-attr]


def test_run_now_makes_a_scheduled_job_claimable(db: Database) -> None:
    later = enqueue(db, job("ok").schedule_in(timedelta(days=1))).id
    now = utcnow()
    assert claim(db, queue="default", node="n1", now=now) == []
    assert retry_job(db, later, ALICE, now).state is JobState.AVAILABLE
    (claimed,) = claim(db, queue="default", node="n1", now=now)
    assert claimed.job.id == later


def test_retry_revives_completed_and_cancelled_jobs(db: Database) -> None:
    done = finished(db, "ok")
    gone = finished(db, "cancel", {"post_id": 1})
    now = utcnow()
    for job_id in (done, gone):
        after = retry_job(db, job_id, ALICE, now)
        assert after.state is JobState.AVAILABLE
        assert (after.completed_at, after.cancelled_at, after.finalized_at) == (None, None, None)
        assert after.max_attempts == 20


def test_an_executing_or_available_job_cannot_be_retried(db: Database) -> None:
    running = enqueue(db, job("ok")).id
    claim(db, queue="default", node="n1")
    waiting = enqueue(db, job("ok")).id
    with pytest.raises(ConflictError) as executing:
        retry_job(db, running, ALICE, utcnow())
    assert executing.value.details["state"] == "executing"
    with pytest.raises(ConflictError) as available:
        retry_job(db, waiting, ALICE, utcnow())
    assert available.value.details["state"] == "available"
    assert audit_of(db, running) == [] and audit_of(db, waiting) == []


@pytest.mark.parametrize(
    ("act", "state", "at"),
    [
        (cancel_job, JobState.CANCELLED, "cancelled_at"),
        (discard_job, JobState.DISCARDED, "discarded_at"),
    ],
)
def test_cancel_and_discard_finalise_a_waiting_job(
    db: Database, act: Any, state: JobState, at: str
) -> None:
    unique = enqueue(db, job("ok", {"n": 1}).unique(Unique.args())).id
    kept = enqueue(db, job("ok", {"n": 2}).unique(Unique.args().keep_all())).id
    retrying = finished(db, "fail", {"message": "x"})
    now = utcnow()
    for job_id in (unique, kept, retrying):
        after = act(db, job_id, ALICE, now)
        assert after.state is state and getattr(after, at) == now and after.finalized_at == now
        (entry,) = audit_of(db, job_id)
        assert entry.action == act.__name__.removesuffix("_job") and entry.actor == "alice"
    assert get_job(db, unique).unique_key is None  # type: ignore[union-attr]
    assert get_job(db, kept).unique_key is not None  # type: ignore[union-attr]
    # The released key admits an identical job again; the kept one does not.
    assert not enqueue(db, job("ok", {"n": 1}).unique(Unique.args())).duplicate
    assert enqueue(db, job("ok", {"n": 2}).unique(Unique.args().keep_all())).duplicate


@pytest.mark.parametrize("act", [cancel_job, discard_job])
def test_a_final_job_cannot_be_cancelled_or_discarded(db: Database, act: Any) -> None:
    done = finished(db, "ok")
    with pytest.raises(ConflictError) as conflict:
        act(db, done, ALICE, utcnow())
    assert conflict.value.details["state"] == "completed"
    assert get_job(db, done).state is JobState.COMPLETED  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("act", "state", "outcome"),
    [
        (cancel_job, JobState.CANCELLED, RunOutcome.CANCELLED),
        (discard_job, JobState.DISCARDED, RunOutcome.DISCARDED),
    ],
)
def test_stopping_an_executing_job_settles_its_run_and_fences_the_old_holder(
    db: Database, act: Any, state: JobState, outcome: RunOutcome
) -> None:
    inserted = enqueue(db, job("ok")).id
    (claimed,) = claim(db, queue="default", node="n1")
    now = utcnow()
    after = act(db, inserted, ALICE, now)
    assert after.state is state and after.lease_token is None and after.lease_expires_at is None
    (run,) = list_runs(db, inserted)
    assert run.outcome is outcome and run.finished_at == now and "alice@ops-1" in (run.error or "")
    # The pool's next renewal finds the lease gone, and its late outcome changes nothing.
    assert renew_leases(db, node="n1", tokens=[claimed.lease_token], now=now) == set()
    assert record(db, [(claimed, execute(registry, claimed))], registry=registry) == set()
    final = get_job(db, inserted)
    assert final is not None and final.state is state
    assert list_runs(db, inserted)[0].outcome is outcome
    (entry,) = audit_of(db, inserted)
    assert entry.details["from"] == "executing" and entry.details["node"] == "n1"


def test_cancelling_an_executing_job_notifies_pools_on_postgresql(db: Database) -> None:
    if not db.is_postgresql:
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    import psycopg

    from kickside_engine.store.notify import channel_name

    inserted = enqueue(db, job("ok")).id
    claim(db, queue="default", node="n1")
    url = db.engine.url.set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as listener:
        listener.execute(f'LISTEN "{channel_name(db)}"')
        cancel_job(db, inserted, ALICE, utcnow())
        payloads = [n.payload for n in listener.notifies(timeout=10, stop_after=2)]
    # The pools' cancel, then the audit row's notification (for dashboards), in commit order.
    assert payloads == [f"cancel:{inserted}", "audit:cancel"]


def test_delete_removes_the_job_and_its_runs(db: Database) -> None:
    done = finished(db, "ok")
    assert len(list_runs(db, done)) == 1
    deleted = delete_job(db, done, ALICE, utcnow())
    assert deleted.id == done and deleted.state is JobState.COMPLETED
    assert get_job(db, done) is None and list_runs(db, done) == []
    with db.read() as conn:
        runs = conn.execute(sa.select(sa.func.count()).select_from(db.tables.job_run)).scalar()
    assert runs == 0
    (entry,) = audit_of(db, done)
    assert entry.action == "delete" and entry.details["from"] == "completed"


def test_an_executing_job_cannot_be_deleted(db: Database) -> None:
    running = enqueue(db, job("ok")).id
    claim(db, queue="default", node="n1")
    with pytest.raises(ConflictError) as conflict:
        delete_job(db, running, ALICE, utcnow())
    assert conflict.value.details["state"] == "executing"
    assert get_job(db, running) is not None


@pytest.mark.parametrize("act", [retry_job, cancel_job, discard_job, delete_job])
def test_actions_on_unknown_or_malformed_ids(db: Database, act: Any) -> None:
    with pytest.raises(NotFoundError):
        act(db, uuid.uuid4(), ALICE, utcnow())
    with pytest.raises(InvalidArgumentError, match="not a UUID"):
        act(db, "12345", ALICE, utcnow())
    with pytest.raises(InvalidArgumentError, match="now"):
        act(db, uuid.uuid4(), ALICE, datetime(2030, 1, 1))
    assert list_audit(db).entries == []


# --- queues and nodes ----------------------------------------------------------------------


def test_pause_stops_claims_on_every_node_until_resumed(db: Database) -> None:
    waiting = enqueue(db, job("ok")).id
    t1 = utcnow()
    info = pause_queue(db, "default", ALICE, t1)
    assert info.paused and info.paused_at == t1 and info.paused_by == "alice@ops-1"
    assert info.counts[JobState.AVAILABLE] == 1
    assert claim(db, queue="default", node="n1") == []
    assert claim(db, queue="default", node="n2") == []
    again = pause_queue(db, "default", Actor("bob", "ops-2"), t1 + timedelta(minutes=1))
    assert again.paused and again.paused_at == t1 and again.paused_by == "alice@ops-1"
    resumed = resume_queue(db, "default", ALICE, t1 + timedelta(minutes=2))
    assert not resumed.paused and resumed.paused_at is None and resumed.paused_by is None
    assert resume_queue(db, "default", ALICE, t1 + timedelta(minutes=3)) == resumed
    (claimed,) = claim(db, queue="default", node="n1")
    assert claimed.job.id == waiting
    entries = list_audit(db, target="default").entries
    assert [(e.action, e.actor, e.details["changed"]) for e in reversed(entries)] == [
        ("pause", "alice", True),
        ("pause", "bob", False),
        ("resume", "alice", True),
        ("resume", "alice", False),
    ]
    assert {e.target_type for e in entries} == {"queue"}


def test_pausing_an_unknown_queue_is_refused_unless_create(db: Database) -> None:
    enqueue(db, job("ok").queue("mailers"))
    for act in (
        lambda: pause_queue(db, "imports", ALICE, utcnow()),
        lambda: resume_queue(db, "imports", ALICE, utcnow()),
    ):
        with pytest.raises(NotFoundError, match="known queues: mailers") as info:
            act()
        assert info.value.details == {"queue": "imports", "known": ["mailers"]}
    assert [q.name for q in list_queues(db, utcnow())] == ["mailers"]  # no queue was made
    assert list_audit(db).entries == []
    created = pause_queue(db, "imports", ALICE, utcnow(), create=True)
    assert created.name == "imports" and created.paused and not created.no_node
    assert [q.name for q in list_queues(db, utcnow())] == ["imports", "mailers"]
    with pytest.raises(InvalidArgumentError, match="queue"):
        pause_queue(db, "has space", ALICE, utcnow(), create=True)


def test_a_queue_only_a_live_node_runs_is_known(db: Database) -> None:
    now = utcnow()
    add_node(db, "fresh", {"billing": 2}, now)
    add_node(db, "stale", {"legacy": 2}, now - NODE_STALE_AFTER - timedelta(seconds=1))
    found = find_queue(db, "billing", now)
    assert [n.node for n in found.nodes] == ["fresh"] and not found.paused
    assert pause_queue(db, "billing", ALICE, now).paused
    with pytest.raises(NotFoundError, match="known queues: billing"):
        find_queue(db, "legacy", now)  # a stale node runs nothing


def add_node(db: Database, name: str, queues: Any, heartbeat_at: datetime) -> None:
    with db.begin() as conn:
        conn.execute(
            sa.insert(db.tables.node).values(
                name=name,
                host=f"{name}.local",
                pid=4242,
                queues=queues,
                code_version="v1",
                executors_busy=1,
                executors_total=4,
                started_at=heartbeat_at - timedelta(hours=1),
                heartbeat_at=heartbeat_at,
            )
        )


def test_list_queues_flags_queues_no_live_node_runs(db: Database) -> None:
    now = utcnow()
    enqueue(db, job("ok"))
    enqueue(db, job("ok").queue("mailers"))
    enqueue(db, job("ok").queue("reports").schedule_in(timedelta(hours=1)))
    pause_queue(db, "empty", ALICE, now, create=True)
    add_node(db, "fresh", {"default": 10, "reports": 2}, now - timedelta(seconds=5))
    add_node(db, "stale", {"mailers": 5}, now - NODE_STALE_AFTER - timedelta(seconds=1))
    queues = {q.name: q for q in list_queues(db, now)}
    assert list(queues) == ["default", "empty", "mailers", "reports"]
    default, mailers = queues["default"], queues["mailers"]
    assert [(n.node, n.concurrency) for n in default.nodes] == [("fresh", 10)]
    assert default.concurrency == 10 and not default.no_node
    assert mailers.nodes == () and mailers.no_node
    assert not queues["reports"].no_node  # nothing is available there yet
    assert queues["empty"].paused and not queues["empty"].no_node
    # Once the stale node heartbeats again, mailers has a node.
    with db.begin() as conn:
        conn.execute(sa.update(db.tables.node).values(heartbeat_at=now))
    assert not {q.name: q for q in list_queues(db, now)}["mailers"].no_node


def test_list_nodes_reports_heartbeat_age_and_staleness(db: Database) -> None:
    now = utcnow()
    add_node(db, "a", {"default": 10}, now - timedelta(seconds=3))
    add_node(db, "b", ["default"], now - timedelta(minutes=5))
    a, b = list_nodes(db, now)
    assert (a.name, a.host, a.pid, a.code_version) == ("a", "a.local", 4242, "v1")
    assert (a.executors_busy, a.executors_total) == (1, 4)
    assert a.queues == {"default": 10} and a.heartbeat_age == timedelta(seconds=3)
    assert not a.stale
    assert b.stale and b.heartbeat_age == timedelta(minutes=5) and b.queues == {"default": 0}


def test_resume_of_what_was_shown_refuses_a_job_that_moved_on(db: Database) -> None:
    """The dashboard resumes the disabled slot it showed: if the slot has meanwhile been
    enabled and parked, resume is a conflict, not a wake (nothing beyond what was shown)."""
    slot_id = enqueue(db, JobBuilder("ok", {}).slot("ns", "sc", "k")).id
    disable_slot(db, slot_id)
    resumed = resume_job(db, slot_id, ALICE, utcnow(), expected_state=JobState.DISABLED)
    assert resumed.state is JobState.PARKED
    (entry,) = list_audit(db, target=str(slot_id), action="resume").entries
    assert entry.details["via"] == "enable"
    with pytest.raises(ConflictError, match="is now parked, no longer disabled"):
        resume_job(db, slot_id, ALICE, utcnow(), expected_state=JobState.DISABLED)
    job = get_job(db, slot_id)
    assert job is not None and job.state is JobState.PARKED
    assert len(list_audit(db, target=str(slot_id), action="resume").entries) == 1
