"""The audit trail on both backends: written with the change, redacted, paged newest first."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa

from kickside_engine import Database, InvalidArgumentError, JobBuilder, JobState, enqueue
from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import utcnow
from kickside_engine.control import cancel_job
from kickside_engine.control.audit import list_audit

ALICE = Actor("alice", "ops-1")


def test_an_entry_records_who_where_when_and_what(db: Database) -> None:
    now = utcnow()
    with db.begin() as conn:
        written = record_audit(
            db,
            conn,
            ALICE,
            "cancel",
            "job",
            "some-id",
            {"from": JobState.EXECUTING, "id": uuid.UUID(int=1), "at": now},
            now,
        )
    (entry,) = list_audit(db).entries
    assert entry == written
    assert (entry.actor, entry.host, entry.action, entry.target_type, entry.target) == (
        "alice",
        "ops-1",
        "cancel",
        "job",
        "some-id",
    )
    assert entry.at == now
    assert entry.details == {
        "from": "executing",
        "id": str(uuid.UUID(int=1)),
        "at": now.isoformat(),
    }


def test_details_and_target_are_stored_redacted(db: Database) -> None:
    details = {
        "url": "https://deploy:not-a-password@api.example.com/v1",
        "password": "hunter2",
        "note": "retry with token=not-a-token",
    }
    with db.begin() as conn:
        record_audit(
            db, conn, ALICE, "note", "queue", "https://u:pw-in-target@host/q", details, utcnow()
        )
    (entry,) = list_audit(db).entries
    assert entry.details["password"] == "[REDACTED]"
    assert "api.example.com/v1" in entry.details["url"]
    with db.read() as conn:
        dump = " ".join(str(v) for row in conn.execute(sa.select(db.tables.audit)) for v in row)
    for secret in ("not-a-password", "hunter2", "not-a-token", "pw-in-target"):
        assert secret not in dump


def test_an_entry_rolls_back_with_its_change(db: Database) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    with pytest.raises(RuntimeError), db.begin() as conn:
        record_audit(db, conn, ALICE, "cancel", "job", str(job_id), {}, utcnow())
        raise RuntimeError("the change failed")
    assert list_audit(db).entries == []
    cancel_job(db, job_id, ALICE, utcnow())
    assert [e.action for e in list_audit(db).entries] == ["cancel"]


def test_the_connection_first_order_is_refused_with_a_clear_error(db: Database) -> None:
    with db.begin() as conn, pytest.raises(InvalidArgumentError, match="database comes first"):
        record_audit(conn, db, ALICE, "cancel", "job", "x", {}, utcnow())  # type: ignore[arg-type]
    assert list_audit(db).entries == []


def test_pages_are_newest_first_and_cover_every_entry_once(db: Database) -> None:
    start = utcnow()
    with db.begin() as conn:
        for i in range(23):
            action = "pause" if i % 2 else "resume"
            record_audit(
                db,
                conn,
                ALICE,
                action,
                "queue",
                f"q{i % 3}",
                {"i": i},
                start + timedelta(seconds=i),
            )
    seen: list[int] = []
    cursor = None
    while True:
        page = list_audit(db, limit=5, cursor=cursor)
        seen += [e.details["i"] for e in page.entries]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == list(range(22, -1, -1))
    pauses = list_audit(db, action="pause").entries
    assert [e.details["i"] for e in pauses] == list(range(21, 0, -2))
    assert {e.target for e in list_audit(db, target="q1", limit=100).entries} == {"q1"}
    assert len(list_audit(db, action="pause", target="q1").entries) == 4


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"action": ""}, "action"),
        ({"action": "x" * 65}, "action"),
        ({"target_type": "t" * 33}, "target_type"),
        ({"target": "x" * 513}, "target"),
        ({"details": {"when": object()}}, "details"),
        ({"details": {"n": float("nan")}}, "details"),
    ],
)
def test_bad_entries_are_refused(db: Database, kwargs: dict[str, object], match: str) -> None:
    args: dict[str, object] = {
        "action": "cancel",
        "target_type": "job",
        "target": "id",
        "details": {},
    }
    args.update(kwargs)
    with pytest.raises(InvalidArgumentError, match=match), db.begin() as conn:
        record_audit(db, conn, ALICE, now=utcnow(), **args)  # type: ignore[arg-type]
    assert list_audit(db).entries == []


def test_bad_cursor_and_limit(db: Database) -> None:
    with pytest.raises(InvalidArgumentError, match="cursor"):
        list_audit(db, cursor="nope")
    with pytest.raises(InvalidArgumentError, match="limit"):
        list_audit(db, limit=0)


def test_actor_current_is_this_user_on_this_host() -> None:
    actor = Actor.current()
    assert actor.user and actor.host
    assert str(actor) == f"{actor.user}@{actor.host}"


def test_actor_current_falls_back_to_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_user() -> str:
        raise OSError("no login name")

    monkeypatch.setattr("getpass.getuser", no_user)
    assert Actor.current().user == "unknown"


@pytest.mark.parametrize(("user", "host"), [("", "h"), ("u", ""), ("u" * 256, "h")])
def test_actor_fields_are_validated(user: str, host: str) -> None:
    with pytest.raises(InvalidArgumentError, match="actor"):
        Actor(user, host)
