"""Uniqueness: at most one job per key while the rule covers it (a unique index, no locks)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kickside_engine import Job, Unique, WorkerRegistry, connect_database, migrate

registry = WorkerRegistry()


# A worker-wide rule: one pending reindex per document, whatever else the args say.
@registry.worker("reindex", unique=Unique.args_keys("document_id"))
def reindex(args: dict[str, Any], job: Job) -> None: ...


@registry.worker("send_digest")
def send_digest(args: dict[str, Any], job: Job) -> None: ...


db = connect_database()
migrate.upgrade(db)

first = reindex.new({"document_id": 7, "reason": "edited"}).insert(db)
again = reindex.new({"document_id": 7, "reason": "tagged"}).insert(db)
assert again.duplicate and again.id == first.id  # the existing job, nothing inserted

# Per job: one digest per user within 5-minute buckets (a debounce), by all args.
rule = Unique.args().within(timedelta(minutes=5))
one = send_digest.new({"user_id": 1}).unique(rule).insert(db)
two = send_digest.new({"user_id": 1}).unique(rule).insert(db)
other = send_digest.new({"user_id": 2}).unique(rule).insert(db)
assert two.duplicate and not other.duplicate
print(first.id, one.id, other.id)
