"""The demo application's workers: what a small web shop might run in the background.

Executor processes import this module (``kickside worker --app kickside_tui.demo.workers``).
Every name the demo writes starts with ``demo``: workers and the capacity group ``demo.``,
queues ``demo-``, so nothing of the demo's can be taken for an application's (and
:mod:`kickside_tui.demo.database` can tell a database the demo filled from any other).
Every worker retries within seconds, so a run of the demo shows whole retry sequences.
"""

from __future__ import annotations

import random
import time
from datetime import timedelta
from typing import Any

from kickside_engine import (
    Backoff,
    CapacityDeclaration,
    Discard,
    Done,
    Job,
    RetryAfter,
    Snooze,
    WorkerRegistry,
)

registry = WorkerRegistry()
EXPORTS = CapacityDeclaration("demo.exports", "demo.capacity")
#: Attempt n waits n**1.5 + 3 s plus up to n s of jitter (about 5 s, 7 s, 10 s...), at most 30 s.
QUICK_RETRY = Backoff(
    base=timedelta(seconds=3),
    exponent=1.5,
    jitter_per_attempt=timedelta(seconds=1),
    cap=timedelta(seconds=30),
)


def _work(low: float, high: float) -> None:
    time.sleep(random.uniform(low, high))


@registry.worker("demo.send_receipt", queue="demo-mailers", max_attempts=5, backoff=QUICK_RETRY)
def send_receipt(args: dict[str, Any], job: Job) -> Discard | None:
    _work(0.05, 0.4)
    if args.get("email", "").endswith("@invalid.example"):
        return Discard(f"mailbox {args['email']} does not exist")
    if random.random() < 0.15:
        # Providers quote the URL that failed, credentials and all: stored redacted.
        raise ConnectionError(
            "SMTP relay refused: https://mailer:hunter2-not-real@smtp.example.com/v3/send"
            "?api_key=sk_live_not_a_real_key"
        )
    return None


@registry.worker(
    "demo.resize_image", queue="demo-default", timeout=timedelta(seconds=20), backoff=QUICK_RETRY
)
def resize_image(args: dict[str, Any], job: Job) -> None:
    _work(0.1, 1.2)


@registry.worker("demo.charge_card", queue="demo-default", max_attempts=8, backoff=QUICK_RETRY)
def charge_card(args: dict[str, Any], job: Job) -> Snooze | None:
    _work(0.1, 0.5)
    roll = random.random()
    if roll < 0.1:
        raise RetryAfter("payment provider rate limited us", after=timedelta(seconds=5))
    if roll < 0.2:
        return Snooze(timedelta(seconds=4))
    if roll < 0.3:
        raise RuntimeError(f"card processor timeout for order {args.get('order_id')}")
    return None


@registry.worker("demo.sync_account", queue="demo-sync", backoff=QUICK_RETRY)
def sync_account(args: dict[str, Any], job: Job) -> Done:
    _work(0.3, 1.5)
    return Done(demand_satisfied=random.random() < 0.5)


@registry.worker(
    "demo.export_report",
    queue="demo-exports",
    capacity=EXPORTS,
    timeout=timedelta(seconds=30),
    backoff=QUICK_RETRY,
)
def export_report(args: dict[str, Any], job: Job) -> None:
    _work(1.0, 4.0)


@registry.worker("demo.rebuild_search_index", queue="demo-maintenance", backoff=QUICK_RETRY)
def rebuild_search_index(args: dict[str, Any], job: Job) -> None:
    _work(0.2, 0.8)


@registry.worker("demo.generate_invoice", queue="demo-billing", backoff=QUICK_RETRY)
def generate_invoice(args: dict[str, Any], job: Job) -> None:
    _work(0.1, 0.3)
