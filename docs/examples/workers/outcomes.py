"""Every way a worker can end an attempt, run here with the testing helper drain_jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kickside_engine import (
    Cancel,
    Discard,
    Job,
    JobState,
    Outcome,
    RetryAfter,
    Snooze,
    WorkerRegistry,
    connect_database,
    get_job,
    migrate,
)
from kickside_engine.testing import drain_jobs

registry = WorkerRegistry()
ORDERS = {1: "paid", 2: "pending", 3: "deleted"}


@registry.worker("ship_order", queue="shipping", max_attempts=10)
def ship_order(args: dict[str, Any], job: Job) -> Outcome | None:
    status = ORDERS.get(args["order_id"])
    if status is None:
        return Discard(f"no order {args['order_id']}")  # retrying cannot help
    if status == "deleted":
        return Cancel("the order was deleted")  # the work no longer matters
    if status == "pending":
        return Snooze(timedelta(minutes=5))  # not yet; the attempt is given back
    if args.get("carrier_down"):
        # Fail this attempt; retry no sooner than the carrier asked (and with backoff).
        raise RetryAfter("carrier API answered 503", after=timedelta(minutes=2))
    return None  # done (the same as returning Done())


db = connect_database()
migrate.upgrade(db)
ids = {
    name: ship_order.new(args).insert(db).id
    for name, args in {
        "shipped": {"order_id": 1},
        "snoozed": {"order_id": 2},
        "cancelled": {"order_id": 3},
        "discarded": {"order_id": 4},
        "retrying": {"order_id": 1, "carrier_down": True},
    }.items()
}
drain_jobs(db, registry)  # runs every due job once, here, in this thread


def state(name: str) -> JobState:
    job = get_job(db, ids[name])
    assert job is not None
    return job.state


assert state("shipped") is JobState.COMPLETED
assert state("snoozed") is JobState.SCHEDULED  # due again in 5 minutes
assert state("cancelled") is JobState.CANCELLED
assert state("discarded") is JobState.DISCARDED
assert state("retrying") is JobState.RETRYABLE  # due again after its backoff
retrying = get_job(db, ids["retrying"])
assert retrying is not None and "503" in retrying.errors[-1].error
print({name: state(name).value for name in ids})
