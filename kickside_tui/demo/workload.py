"""The demo workload: a pool running the demo workers, and a steady stream of new work.

Everything it writes goes by the demo's names (queues ``demo-...``, workers, capacity group,
slot namespace and cron key ``demo.``), listed in :data:`OWNERSHIP`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from datetime import timedelta

from kickside_engine import (
    Database,
    JobBuilder,
    Recurring,
    Unique,
    WorkerSpec,
    enqueue,
    enqueue_many,
    wake_job,
)
from kickside_engine.control import Actor, Ownership, pause_queue, redact_text, set_capacity, utcnow
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_tui.demo import marker
from kickside_tui.demo.workers import EXPORTS, registry

APP = "kickside_tui.demo.workers"
#: The queue the demo pauses, as a live system would have one (resume it to see it drain).
PAUSED = "demo-billing"
QUEUES = {
    "demo-default": 6,
    "demo-mailers": 4,
    "demo-sync": 3,
    "demo-exports": 3,
    "demo-maintenance": 1,
    PAUSED: 1,
}
SLOT_NAMESPACE = "demo.accounts"
ACCOUNTS = [f"acct-{n:03d}" for n in range(1, 13)]
ACTOR = Actor("demo", "kickside-demo")
SCHEDULE = (
    Recurring(
        "demo.search_index_refresh",
        "* * * * *",
        lambda: JobBuilder.for_worker(_spec("demo.rebuild_search_index")),
    ),
)
#: Every name the demo writes under: a database holding anything else is not the demo's.
OWNERSHIP = Ownership(
    queues=frozenset(QUEUES) | {spec.queue for spec in registry},
    workers=frozenset(registry.names()),
    setting_namespaces=frozenset({marker.NAMESPACE, EXPORTS.settings_namespace}),
    cron_keys=frozenset(entry.key for entry in SCHEDULE),
)


def _spec(name: str) -> WorkerSpec:
    spec = registry.get(name)
    assert spec is not None
    return spec


def job(name: str, args: dict[str, object]) -> JobBuilder:
    """A builder for a demo worker, with its declared defaults."""
    return _spec(name).new(args)


def _account(account: str) -> JobBuilder:
    """The slot that syncs ``account``."""
    return job("demo.sync_account", {"account": account}).slot(SLOT_NAMESPACE, "sync", account)


def prepare(db: Database) -> None:
    """Settings, a paused queue and the first slots: the state a live system would have.

    It also marks the database as the demo's, so the dashboard shows the demo's cron schedule
    without ``--schedule``.
    """
    now = utcnow()
    marker.mark(db, [entry.key for entry in SCHEDULE], ACTOR, now)
    set_capacity(
        db,
        EXPORTS.settings_namespace,
        global_limit=2,
        per_key_limit=1,
        actor=ACTOR,
        now=now,
        create=True,  # before the first export job declares it
    )
    pause_queue(db, PAUSED, ACTOR, now, create=True)
    for account in ACCOUNTS:
        _account(account).insert(db)


def tick(db: Database, rng: random.Random) -> None:
    """One second of traffic."""
    orders = [rng.randint(1000, 9999) for _ in range(rng.randint(1, 4))]
    batch = []
    for order in orders:
        email = f"customer{order}@{'invalid.example' if rng.random() < 0.05 else 'example.com'}"
        tag = f"order:{order}"
        batch.append(job("demo.send_receipt", {"order_id": order, "email": email}).tag(tag))
        batch.append(job("demo.charge_card", {"order_id": order}).tag(tag))
        batch.append(job("demo.resize_image", {"image_id": order * 7}))
    if rng.random() < 0.3:
        batch.append(job("demo.generate_invoice", {"order_id": orders[0]}))
    enqueue_many(db, batch)
    if rng.random() < 0.5:
        customer = rng.choice(["northwind", "acme", "globex", "initech"])
        enqueue(
            db,
            job("demo.export_report", {"customer": customer})
            .concurrency_key(customer)
            .unique(Unique.args_keys("customer").within(timedelta(seconds=5))),
        )
    if rng.random() < 0.6:
        account = rng.choice(ACCOUNTS)
        inserted = _account(account).insert(db)
        wake_job(db, inserted.id, control=False)
    if rng.random() < 0.05:
        later = job("demo.resize_image", {"image_id": rng.randint(1, 99)})
        enqueue(db, later.schedule_in(timedelta(minutes=rng.randint(1, 30))))


class Demo:
    """The pool and the traffic generator, started and stopped together.

    Through a database outage the pool retries with backoff, as any pool does, and the
    traffic pauses: ``report`` hears once that it paused (and why) and once that it resumed.
    """

    def __init__(
        self,
        db: Database,
        *,
        seed: int | None = None,
        report: Callable[[str], None] | None = None,
    ) -> None:
        self.db = db
        self.rng = random.Random(seed)
        self.report = report or (lambda message: None)
        self.pool = WorkerPool(
            db,
            PoolConfig(
                queues=dict(QUEUES), app=APP, schedule=SCHEDULE, shutdown_grace=timedelta(seconds=3)
            ),
        )
        self._stop = threading.Event()
        self._traffic = threading.Thread(target=self._run, name="kickside-demo", daemon=True)

    def start(self) -> None:
        prepare(self.db)
        self.pool.start()
        self._traffic.start()

    def _run(self) -> None:
        failing_since: float | None = None
        while not self._stop.is_set():
            try:
                tick(self.db, self.rng)
            except Exception as exc:  # keep generating; the dashboard shows the database state
                if failing_since is None:
                    failing_since = time.monotonic()
                    self.report(f"demo traffic paused: {describe(exc)} (retrying every second)")
            else:
                if failing_since is not None:
                    paused = time.monotonic() - failing_since
                    self.report(f"demo traffic resumed after {paused:.0f}s")
                    failing_since = None
            self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self._traffic.join(5)
        self.pool.stop(30)


def describe(exc: BaseException) -> str:
    """The first line of ``exc``, redacted (a driver's message may quote the database URL)."""
    lines = str(exc).strip().splitlines()
    return redact_text(lines[0] if lines else type(exc).__name__)
