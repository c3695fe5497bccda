"""The demo workload: a pool running the demo workers, and a steady stream of new work."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from datetime import timedelta

from kickside_engine import Database, JobBuilder, WorkerSpec, enqueue, enqueue_many, wake_job
from kickside_engine.capacity import set_capacity
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, pause_queue
from kickside_engine.plugins.cron import Recurring
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.uniqueness import Unique
from kickside_tui.demo import marker
from kickside_tui.demo.workers import EXPORTS, registry

APP = "kickside_tui.demo.workers"
QUEUES = {"default": 6, "mailers": 4, "sync": 3, "exports": 3, "maintenance": 1}
ACCOUNTS = [f"acct-{n:03d}" for n in range(1, 13)]
SCHEDULE = (
    Recurring(
        "search_index_refresh",
        "* * * * *",
        lambda: JobBuilder.for_worker(_spec("rebuild_search_index")),
    ),
)


def _spec(name: str) -> WorkerSpec:
    spec = registry.get(name)
    assert spec is not None
    return spec


def job(name: str, args: dict[str, object]) -> JobBuilder:
    """A builder for a demo worker, with its declared defaults."""
    return _spec(name).new(args)


def prepare(db: Database) -> None:
    """Settings, a paused queue and the first slots: the state a live system would have.

    It also marks the database as the demo's, so the dashboard shows the demo's cron schedule
    without ``--schedule``.
    """
    actor = Actor("demo", "kickside-demo")
    now = utcnow()
    marker.mark(db, [entry.key for entry in SCHEDULE], actor, now)
    set_capacity(
        db, EXPORTS.settings_namespace, global_limit=2, per_key_limit=1, actor=actor, now=now
    )
    pause_queue(db, "billing", actor, now)
    for account in ACCOUNTS:
        job("sync_account", {"account": account}).slot("accounts", "sync", account).insert(db)


def tick(db: Database, rng: random.Random) -> None:
    """One second of traffic."""
    orders = [rng.randint(1000, 9999) for _ in range(rng.randint(1, 4))]
    batch = []
    for order in orders:
        email = f"customer{order}@{'invalid.example' if rng.random() < 0.05 else 'example.com'}"
        batch.append(job("send_receipt", {"order_id": order, "email": email}).tag(f"order:{order}"))
        batch.append(job("charge_card", {"order_id": order}).tag(f"order:{order}"))
        batch.append(job("resize_image", {"image_id": order * 7}))
    if rng.random() < 0.3:
        batch.append(job("generate_invoice", {"order_id": orders[0]}))
    enqueue_many(db, batch)
    if rng.random() < 0.5:
        customer = rng.choice(["northwind", "acme", "globex", "initech"])
        enqueue(
            db,
            job("export_report", {"customer": customer})
            .concurrency_key(customer)
            .unique(Unique.args_keys("customer").within(timedelta(seconds=5))),
        )
    if rng.random() < 0.6:
        account = rng.choice(ACCOUNTS)
        inserted = (
            job("sync_account", {"account": account}).slot("accounts", "sync", account).insert(db)
        )
        wake_job(db, inserted.id, control=False)
    if rng.random() < 0.05:
        later = job("resize_image", {"image_id": rng.randint(1, 99)})
        enqueue(db, later.schedule_in(timedelta(minutes=rng.randint(1, 30))))


class Demo:
    """The pool and the traffic generator, started and stopped together."""

    def __init__(
        self,
        db: Database,
        *,
        seed: int | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.db = db
        self.rng = random.Random(seed)
        self.on_error = on_error
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
        while not self._stop.is_set():
            try:
                tick(self.db, self.rng)
            except Exception as exc:  # keep generating; the dashboard shows the database state
                if self.on_error:
                    self.on_error(exc)
            self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self._traffic.join(5)
        self.pool.stop(30)
