"""Rate limits of capacity groups, on both backends: starts per fixed window, for the group and
per concurrency key, read from settings at every claim and failing closed when invalid; held
jobs stay available and uncharged, and a key at its rate never holds back another key.

Claims here fix their time (``now``), so windows are exact: 13:04:30 is in the minute that
ends at 13:05:00.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
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
    get_job,
    migrate,
)
from kickside_engine.control import Actor, list_audit
from kickside_engine.control.capacity import capacity_groups, set_capacity, stops_work
from kickside_engine.control.explain import explain
from kickside_engine.plugins.pruner import prune_rate_windows
from kickside_engine.store.rate_windows import Rate, parse_rate
from kickside_engine.store.settings import get_settings, set_setting

NS = "app.rates"
RATED = CapacityDeclaration(group="stripe", settings_namespace=NS)
T = datetime(2030, 1, 1, 13, 4, 30, tzinfo=UTC)
ACTOR = Actor("ops", "laptop")


def _noop(args: dict[str, Any], job: Job) -> None:
    return None


stripe = WorkerSpec(name="stripe_call", perform=_noop, queue="stripe", capacity=RATED)


def limits(db: Database, *, rate: Any = None, per_key: Any = None, concurrent: int = 100) -> None:
    set_setting(db, NS, "global_limit", concurrent)
    set_setting(db, NS, "concurrency_key_limit", concurrent)
    if rate is not None:
        set_setting(db, NS, "rate_limit", rate)
    if per_key is not None:
        set_setting(db, NS, "rate_limit_per_key", per_key)


def jobs_for(db: Database, *keys: str) -> list[uuid.UUID]:
    return [
        JobBuilder.for_worker(stripe, {"n": n}).concurrency_key(key).insert(db).id
        for n, key in enumerate(keys)
    ]


def claim_at(db: Database, at: datetime, limit: int = 50) -> list[ClaimedJob]:
    return claim(db, queue="stripe", node="n1", limit=limit, now=at)


def keys_of(claimed: list[ClaimedJob]) -> list[str]:
    return sorted(str(c.job.concurrency_key) for c in claimed)


def test_rates_parse_from_n_per_unit_and_name_their_window() -> None:
    assert parse_rate("600/min") == Rate(600, 60)
    assert parse_rate(" 10/s ") == Rate(10, 1) and str(parse_rate("3600/h")) == "3600/h"
    assert parse_rate("0/min").limit == 0
    start, end = parse_rate("60/min").window_at(T)
    assert (start, end) == (T.replace(second=0), T.replace(minute=5, second=0))
    assert parse_rate("5/h").window_at(T) == (
        T.replace(minute=0, second=0),
        T.replace(hour=14, minute=0, second=0),
    )
    for bad in ("600", "600/m", "600/minute", "-1/s", "1.5/s", "/s", "10/ s", 600, None, ""):
        with pytest.raises(InvalidArgumentError, match=r"N/unit .* got"):
            parse_rate(bad)


def test_a_group_rate_admits_at_most_the_limit_per_window(db: Database) -> None:
    limits(db, rate="3/min")
    ids = jobs_for(db, *(f"k{i}" for i in range(8)))
    assert len(claim_at(db, T)) == 3
    assert claim_at(db, T + timedelta(seconds=20)) == []  # same minute: none, even one by one
    for job_id in ids[3:]:  # held back, not failed and not charged an attempt
        job = get_job(db, job_id)
        assert job is not None and job.state is JobState.AVAILABLE and job.attempt == 0
    assert len(claim_at(db, T + timedelta(seconds=30))) == 3  # 13:05:00, the next window
    assert len(claim_at(db, T + timedelta(minutes=1, seconds=29))) == 0
    assert len(claim_at(db, T + timedelta(minutes=2))) == 2


def test_finished_jobs_still_count_as_starts_of_their_window(db: Database) -> None:
    limits(db, rate="2/min")
    jobs_for(db, "a", "b", "c")
    for claimed in claim_at(db, T):
        assert complete(db, claimed)
    assert claim_at(db, T + timedelta(seconds=5)) == []  # a rate counts starts, not runs


def test_a_key_at_its_rate_never_holds_back_other_keys(db: Database) -> None:
    limits(db, per_key="2/min")
    jobs_for(db, *(["hot"] * 6), "cold", "warm")  # hot's backlog comes first in claim order
    assert keys_of(claim_at(db, T, limit=3)) == ["cold", "hot", "hot"]
    assert keys_of(claim_at(db, T)) == ["warm"]
    jobs_for(db, "cold")
    assert keys_of(claim_at(db, T + timedelta(seconds=1))) == ["cold"]  # its second start
    assert keys_of(claim_at(db, T + timedelta(seconds=30))) == ["hot", "hot"]


def test_group_and_key_rates_hold_together_with_concurrency_limits(db: Database) -> None:
    limits(db, rate="4/min", per_key="2/min", concurrent=3)
    jobs_for(db, *(["a"] * 4), *(["b"] * 4), *(["c"] * 4))
    first = claim_at(db, T)
    assert keys_of(first) == ["a", "a", "b"]  # concurrency: 3 at once
    for c in first:
        complete(db, c)
    # a is at its key rate (2 this minute); b in claim order before c; then the group's 4
    assert keys_of(claim_at(db, T + timedelta(seconds=1))) == ["b"]
    assert claim_at(db, T + timedelta(seconds=2)) == []
    assert keys_of(claim_at(db, T + timedelta(seconds=30))) == ["a", "a"]  # b still runs: 3


def test_an_unset_rate_is_no_limit_and_an_invalid_one_admits_nothing(db: Database) -> None:
    limits(db)
    jobs_for(db, *(f"k{i}" for i in range(10)))
    assert len(claim_at(db, T, limit=5)) == 5  # no rate settings: concurrency only
    for bad in ("lots", 600, "600/minute", {"limit": 1}, None):
        set_setting(db, NS, "rate_limit_per_key", bad)
        assert claim_at(db, T) == [], bad
        (group,) = capacity_groups(db, T)
        assert "rate_limit_per_key is not a rate" in (group.problem or "")
        assert group.near_limit
    set_setting(db, NS, "rate_limit_per_key", "1/s")
    assert len(claim_at(db, T)) == 5  # read again by the very next claim


def test_explain_names_the_rate_reached_and_the_next_admission(db: Database) -> None:
    limits(db, rate="3/h", per_key="2/min")
    held = jobs_for(db, "acct-1", "acct-1", "acct-1")[2]
    claim_at(db, T)
    reasons = {r.code: r for r in explain(db, held, now=T).reasons}
    assert reasons["concurrency_key_rate_limited"].message == (
        "rate for key acct-1 reached (2/2 this minute), next admission at 13:05:00 UTC"
    )
    assert reasons["concurrency_key_rate_limited"].data["next_admission_at"] == datetime(
        2030, 1, 1, 13, 5, tzinfo=UTC
    )
    later = T + timedelta(seconds=30)
    assert "concurrency_key_rate_limited" not in {
        r.code for r in explain(db, held, now=later).reasons
    }
    assert keys_of(claim_at(db, later)) == ["acct-1"]
    reasons = {r.code: r for r in explain(db, jobs_for(db, "acct-2")[0], now=later).reasons}
    assert "concurrency_key_rate_limited" not in reasons
    assert reasons["rate_limited"].message == (
        "rate for group stripe reached (3/3 this hour), next admission at 14:00:00 UTC"
    )


def test_capacity_shows_starts_against_each_rate(db: Database) -> None:
    set_capacity(
        db,
        NS,
        global_limit=10,
        per_key_limit=10,
        rate_limit="3/min",
        rate_limit_per_key="2/min",
        actor=ACTOR,
        now=T,
        create=True,
    )
    jobs_for(db, "a", "a", "a", "b", "c")
    claim_at(db, T)
    (group,) = capacity_groups(db, T)
    assert (group.rate_limit, group.rate_limit_per_key) == ("3/min", "2/min")
    assert group.rate_used == 3 and group.rate_used_per_key == {"a": 2, "b": 1}
    assert group.rate_window_ends_at == datetime(2030, 1, 1, 13, 5, tzinfo=UTC)
    assert group.near_limit
    reasons = {w.concurrency_key: w.reason for w in group.waiting_jobs}
    assert reasons["a"].startswith("rate for the group reached (3/3 this minute)")
    (group,) = capacity_groups(db, T + timedelta(minutes=1))
    assert group.rate_used == 0 and group.rate_used_per_key == {}
    assert not group.near_limit


def test_set_capacity_writes_normalised_rates_removes_them_and_refuses_bad_ones(
    db: Database,
) -> None:
    written = set_capacity(
        db,
        NS,
        rate_limit=" 600/min",
        rate_limit_per_key="60/min",
        actor=ACTOR,
        now=T,
        create=True,
    )
    assert written == {"rate_limit": "600/min", "rate_limit_per_key": "60/min"}
    assert {s.key: s.value for s in get_settings(db, NS)} == written
    assert set_capacity(db, NS, rate_limit="none", actor=ACTOR, now=T) == {"rate_limit": None}
    assert {s.key for s in get_settings(db, NS)} == {"rate_limit_per_key"}
    assert list_audit(db, action="capacity_set").entries[0].details == {"rate_limit": None}
    with pytest.raises(InvalidArgumentError, match="rate limit must be N/unit"):
        set_capacity(db, NS, rate_limit="600 per minute", actor=ACTOR, now=T)
    with pytest.raises(InvalidArgumentError, match="at least one limit"):
        set_capacity(db, NS, actor=ACTOR, now=T)
    assert {s.key: s.value for s in get_settings(db, NS)} == {"rate_limit_per_key": "60/min"}
    assert stops_work(None, None, "0/min") and stops_work(1, 1, None, "0/s")
    assert not stops_work(None, None, "none", "1/h")


def test_the_pruner_deletes_only_ended_windows(db: Database) -> None:
    limits(db, rate="5/min", per_key="5/h")
    jobs_for(db, "a", "b")
    claim_at(db, T)

    def windows() -> int:
        with db.read() as conn:
            table = db.tables.rate_window
            return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())

    assert windows() == 3  # the group's minute, and a and b's hour
    assert prune_rate_windows(db, T) == 0
    assert prune_rate_windows(db, T + timedelta(minutes=1)) == 1
    assert prune_rate_windows(db, T + timedelta(hours=1)) == 2 and windows() == 0


def test_migration_0009_creates_and_drops_the_window_table(db: Database) -> None:
    def tables() -> set[str]:
        with db.read(check_schema=False) as conn:
            return set(sa.inspect(conn).get_table_names(schema=db.schema))

    assert "kickside_rate_window" in tables()
    migrate.downgrade(db, "0008")
    assert "kickside_rate_window" not in tables()
    assert migrate.upgrade(db).up_to_date
    assert "kickside_rate_window" in tables()
