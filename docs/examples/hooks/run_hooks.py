"""Run the middleware and hooks of tracing.py: in this thread with drain_jobs, then in a pool."""

from __future__ import annotations

import time

from tracing import counts, invoice, notify, registry

from kickside_engine import JobState, connect_database, get_job, migrate
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.testing import drain_jobs, perform_job


def main() -> None:
    db = connect_database()
    migrate.upgrade(db)

    # The testing helpers run the middleware too, and drain_jobs calls the pool hooks.
    assert perform_job(invoice, {"order": 1}, meta={"tenant": "acme"}).result == {
        "tenant": "acme",
        "order": 1,
    }
    acme = invoice.new({"order": 2}).meta({"tenant": "acme"}).insert(db)
    drain_jobs(db, registry)
    assert get_job(db, acme.id).result == {"tenant": "acme", "order": 2}  # type: ignore[union-attr]

    # A pool calls them (here on threads of this process, with the registry).
    suspended = invoice.new({"order": 3}).meta({"tenant": "suspended"}).max_attempts(1).insert(db)
    greeted = notify.new({}).meta({"tenant": "globex"}).insert(db)
    pool = WorkerPool(db, PoolConfig(mode="thread", registry=registry, queues={"default": 2}))
    pool.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
            counts["alerts"] and counts["default:done"] == 2
        ):
            time.sleep(0.05)
    finally:
        pool.stop()
    assert get_job(db, suspended.id).state is JobState.DISCARDED  # type: ignore[union-attr]
    assert get_job(db, greeted.id).result == "notified globex"  # type: ignore[union-attr]
    assert counts["enqueued:invoice"] == 2 and counts["default:error"] == 1
    assert counts["default:done"] == 2  # one drained, one from the pool
    print(dict(counts))


if __name__ == "__main__":
    main()
