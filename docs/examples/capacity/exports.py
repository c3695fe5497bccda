"""Capacity groups: a global limit and a per-key limit shared by every pool, read from
kickside_setting at every claim. claim() stands in here for the pools' claims."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kickside_engine import (
    CapacityDeclaration,
    Job,
    WorkerRegistry,
    claim,
    complete,
    connect_database,
    migrate,
)
from kickside_engine.control import Actor, set_capacity, utcnow

registry = WorkerRegistry()
PARTNER_API = CapacityDeclaration(group="partner-api", settings_namespace="exports")


@registry.worker("export_orders", queue="exports", capacity=PARTNER_API)
def export_orders(args: dict[str, Any], job: Job) -> None: ...


db = connect_database()
migrate.upgrade(db)
for n in range(6):  # three tenants with two exports each
    export_orders.new({"batch": n}).concurrency_key(f"tenant-{n % 3}").insert(db)

# No limits set yet: missing settings admit nothing (they never lift the limit).
assert claim(db, queue="exports", node="docs:1", limit=10) == []

# At most 2 exports at once in all, and 1 per tenant (`kickside capacity set` does the same).
set_capacity(
    db, "exports", global_limit=2, per_key_limit=1, actor=Actor("ops", "laptop"), now=utcnow()
)
running = claim(db, queue="exports", node="docs:1", limit=10)
assert len(running) == 2
assert len({c.job.concurrency_key for c in running}) == 2  # never two of one tenant

more = claim(db, queue="exports", node="docs:2", limit=10)  # another node, same limits
assert more == []  # the group is full everywhere

complete(db, running[0])  # one finishes: room for one more
admitted = claim(db, queue="exports", node="docs:2", limit=10)
assert len(admitted) == 1
print(Counter(c.job.concurrency_key for c in [*running, *admitted]))
