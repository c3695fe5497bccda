"""enqueue_fanout: one template, a list of args; the same rows enqueue_many would write, on
every path (COPY lines on PostgreSQL from ``COPY_FROM_ROWS`` jobs, INSERT below that and on
SQLite, in a transaction of its own or the caller's)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from kickside_engine import (
    Database,
    InvalidArgumentError,
    JobBuilder,
    JobState,
    enqueue_fanout,
    enqueue_many,
    get_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import JobFilter, list_jobs
from kickside_engine.redact import REDACTED
from kickside_engine.store.inserts import COPY_FROM_ROWS
from kickside_engine.uniqueness import Unique

from .test_enqueue_many_rows import AWKWARD

SIZES = [1, COPY_FROM_ROWS - 1, COPY_FROM_ROWS + 70]

#: Columns that differ between two jobs built alike: the id alone.
_OWN = {"id"}


def _template() -> JobBuilder:
    return (
        JobBuilder("echo")
        .queue("mailers")
        .priority(3)
        .max_attempts(7)
        .tags(["fan", "out"])
        .meta({"campaign": "december", "note": AWKWARD[2]})
        .max_execution(timedelta(seconds=90))
        .concurrency_key("tenant-1")
    )


def _args(count: int) -> list[dict[str, Any]]:
    """Args with awkward text; every fifth holds a secret (its job gets a redacted copy)."""
    return [
        {"n": i, "text": AWKWARD[i % len(AWKWARD)], "nested": [AWKWARD[i % 3], None, 1.5]}
        | ({"api_key": f"key-{i}\t{AWKWARD[i % 3]}"} if i % 5 == 1 else {})
        for i in range(count)
    ]


def _rows(db: Database, ids: list[Any]) -> list[dict[str, Any]]:
    job = db.tables.job
    with db.read() as conn:
        found = {
            r["id"]: dict(r)
            for r in conn.execute(sa.select(job).where(job.c.id.in_(ids))).mappings()
        }
    return [found[i] for i in ids]


@pytest.mark.parametrize("count", SIZES)
@pytest.mark.parametrize("in_callers_transaction", [False, True])
def test_fanout_writes_the_rows_enqueue_many_would(
    db: Database, count: int, in_callers_transaction: bool
) -> None:
    now = utcnow()
    args = _args(count)
    if in_callers_transaction:
        with db.begin() as conn:
            fanned = enqueue_fanout(db, _template(), args, conn=conn, now=now)
    else:
        fanned = enqueue_fanout(db, _template(), args, now=now)
    built = [_template()._with(args=a) for a in args]  # what a builder per job gives
    many = enqueue_many(db, built, now=now)
    assert [i.state for i in fanned] == [JobState.AVAILABLE] * count
    assert len({i.id for i in fanned}) == count
    for mine, theirs in zip(
        _rows(db, [i.id for i in fanned]), _rows(db, [i.id for i in many]), strict=True
    ):
        assert {k: v for k, v in mine.items() if k not in _OWN} == {
            k: v for k, v in theirs.items() if k not in _OWN
        }
    for i, inserted in enumerate(fanned):  # in the order of args, args exactly as given
        job = get_job(db, inserted.id)
        assert job is not None and job.args == args[i]
        assert job.queue == "mailers" and job.meta["note"] == AWKWARD[2]


@pytest.mark.parametrize("count", SIZES)
def test_a_scheduled_template_schedules_every_job(db: Database, count: int) -> None:
    now = utcnow()
    fanned = enqueue_fanout(
        db, JobBuilder("echo").schedule_in(timedelta(hours=1)), _args(count), now=now
    )
    assert {i.state for i in fanned} == {JobState.SCHEDULED}
    job = get_job(db, fanned[-1].id)
    assert job is not None and job.scheduled_at == now + timedelta(hours=1)


@pytest.mark.parametrize("count", SIZES)
def test_args_are_stored_as_given_and_searched_redacted_like_any_jobs(
    db: Database, count: int
) -> None:
    secret = "https://deploy:not-a-password@api.example.com/v1/charges?token=not-a-token"
    args = [
        {"url": secret, "ssn": "078-05-1120", "token_count": n} if n % 2 else {"order": n}
        for n in range(count)
    ]
    fanned = enqueue_fanout(db, JobBuilder("echo").sensitive_keys({"ssn"}), args)
    for inserted, given in zip(fanned, args, strict=True):
        job = get_job(db, inserted.id)
        assert job is not None and job.args == given  # stored exactly as given
        assert job.meta["sensitive_keys"] == ["ssn"]
        if "url" in given:
            assert job.meta["redacted_args"] == {
                "url": secret.replace("not-a-password", REDACTED).replace("not-a-token", REDACTED),
                "ssn": REDACTED,
                "token_count": given["token_count"],
            }
        else:
            assert "redacted_args" not in job.meta  # nothing to redact: no copy
    with_url = {i.id for i, a in zip(fanned, args, strict=True) if "url" in a}
    for hidden in ("not-a-password", "not-a-token", "078-05-1120"):
        assert list_jobs(db, JobFilter(search=hidden), limit=1000).jobs == []
    found = list_jobs(db, JobFilter(search="api.example.com"), limit=1000).jobs
    assert {j.id for j in found} == with_url


def _count(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar_one())


@pytest.mark.parametrize("count", SIZES)
def test_one_bad_args_deep_in_the_list_writes_none(db: Database, count: int) -> None:
    args: list[Any] = _args(count)
    args.insert(count // 2 + 1, {"unstorable": {1, 2}})
    with pytest.raises(InvalidArgumentError, match="args cannot be stored as JSON"):
        enqueue_fanout(db, JobBuilder("echo"), args)
    assert _count(db) == 0
    args[count // 2 + 1] = "not an object"
    with pytest.raises(InvalidArgumentError, match="args must be a JSON object"):
        enqueue_fanout(db, JobBuilder("echo"), args)
    assert _count(db) == 0
    me: dict[str, Any] = {}
    me["me"] = me
    args[count // 2 + 1] = {"me": me}
    with pytest.raises(InvalidArgumentError, match=r"args\['me'\]\['me'\].*\(a cycle\)"):
        enqueue_fanout(db, JobBuilder("echo"), args)
    assert _count(db) == 0


@pytest.mark.parametrize("count", SIZES)
def test_a_bad_args_leaves_the_callers_transaction_usable(db: Database, count: int) -> None:
    args: list[Any] = [*_args(count), {1: "a key that is not a string"}]
    with db.begin() as conn:
        with pytest.raises(InvalidArgumentError, match="string keys"):
            enqueue_fanout(db, JobBuilder("echo"), args, conn=conn)
        enqueue_fanout(db, JobBuilder("echo"), args[:-1], conn=conn)
    assert _count(db) == count


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (JobBuilder("echo").unique(Unique.args()), "refuses unique jobs"),
        (JobBuilder("echo").slot("ns", "scope", "key"), "refuses slot and identity jobs"),
        (JobBuilder("echo").identity("ns", "scope", "key"), "refuses slot and identity jobs"),
        (JobBuilder("bad worker name!"), "worker"),
    ],
)
def test_templates_it_cannot_fan_out_are_refused(
    db: Database, template: JobBuilder, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        enqueue_fanout(db, template, _args(COPY_FROM_ROWS + 1))
    assert _count(db) == 0


@pytest.mark.parametrize("not_a_list", [{"n": 1}, "args", b"args", 42, None])
def test_args_must_be_a_list(db: Database, not_a_list: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="a list of args objects"):
        enqueue_fanout(db, JobBuilder("echo"), not_a_list)


def test_an_empty_list_inserts_nothing(db: Database) -> None:
    assert enqueue_fanout(db, JobBuilder("echo"), []) == []
    assert _count(db) == 0
