"""Rate limits in a capacity group: at most N job starts per window, for the group and per
concurrency key, shared by every pool. claim() stands in for the pools' claims, at fixed times
so the windows are plain to see."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from kickside_engine import (
    CapacityDeclaration,
    Job,
    WorkerRegistry,
    claim,
    connect_database,
    migrate,
)
from kickside_engine.control import Actor, explain, set_capacity

registry = WorkerRegistry()
STRIPE = CapacityDeclaration(group="stripe", settings_namespace="stripe")


@registry.worker("charge", queue="payments", capacity=STRIPE)
def charge(args: dict[str, Any], job: Job) -> None: ...


db = connect_database()
migrate.upgrade(db)
accounts = ["acct-1"] * 6 + ["acct-2", "acct-3"]  # acct-1 has a backlog of six charges
ids = [charge.new({"n": n}).concurrency_key(a).insert(db).id for n, a in enumerate(accounts)]

# At most 5 charges a minute in all and 2 per account (`kickside capacity set` does the same).
set_capacity(
    db,
    "stripe",
    global_limit=100,
    per_key_limit=100,
    rate_limit="5/min",
    rate_limit_per_key="2/min",
    actor=Actor("ops", "laptop"),
    now=datetime.now(UTC),
)
at = datetime(2030, 1, 1, 13, 4, 30, tzinfo=UTC)  # windows are calendar minutes, in UTC
first = claim(db, queue="payments", node="docs:1", limit=10, now=at)
# acct-1 reached its 2 this minute; its backlog never held back acct-2 and acct-3.
assert sorted(str(c.job.concurrency_key) for c in first) == ["acct-1", "acct-1", "acct-2", "acct-3"]

# A held job is not failed and not charged an attempt: it waits for the next window.
(reason,) = [r for r in explain(db, ids[2], now=at).reasons if r.code.endswith("rate_limited")]
print(
    reason.message
)  # rate for key acct-1 reached (2/2 this minute), next admission at 13:05:00 UTC
assert claim(db, queue="payments", node="docs:2", limit=10, now=at + timedelta(seconds=20)) == []

later = claim(db, queue="payments", node="docs:2", limit=10, now=at + timedelta(seconds=30))
assert [str(c.job.concurrency_key) for c in later] == ["acct-1", "acct-1"]  # 13:05: a new window
