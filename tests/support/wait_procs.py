"""Child processes for the wait-for race: settle jobs at one instant, or wait for them then.

Spawned by ``tests/engine/test_wait_race.py``; only plain data crosses the process line.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence

import kickside_engine.waiting as waiting_rules
from kickside_engine import ClaimedJob, WaitTimeoutError, claim, complete, wait_for

from .slot_procs import TASK_DEADLINE_S, _open

#: A waiter that missed its notification would sleep this long: the race's timeout ends first.
NEVER_S = 3600.0


def settle_at(
    url: str, schema: str | None, queue: str, node: str, count: int, at: float, seed: int
) -> None:
    """Claim ``count`` jobs of ``queue``, then complete each at ``at`` give or take 30 ms."""
    rng = random.Random(seed)
    with _open(url, schema) as db:
        deadline = time.monotonic() + TASK_DEADLINE_S
        claimed: list[ClaimedJob] = []
        while len(claimed) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{node}: claimed {len(claimed)} of {count}")
            claimed += claim(db, queue=queue, node=node, limit=count - len(claimed))
        for job in sorted(claimed, key=lambda _: rng.random()):
            time.sleep(max(0.0, at + rng.uniform(-0.03, 0.03) - time.time()))
            if not complete(db, job):
                raise RuntimeError(f"{node}: lost the lease of {job.job.id}")


def wait_at(
    url: str, schema: str | None, job_ids: Sequence[str], at: float, timeout: float, seed: int
) -> list[str]:
    """Wait for each of ``job_ids`` on a thread of its own, each starting at ``at`` give or
    take 30 ms, with the safety reads spaced further apart than ``timeout``: only a
    notification (or a first read that finds the job final) ends a wait in time, and a wait
    that ends at its timeout's last read (past half of it) missed its notification. Returns
    the waits that failed, each as a line."""
    rng = random.Random(seed)
    waiting_rules.HEARD_POLL_SECONDS = NEVER_S
    failures: list[str] = []
    with _open(url, schema) as db:

        def wait_one(job_id: str, start: float) -> None:
            time.sleep(max(0.0, start - time.time()))
            began = time.monotonic()
            try:
                result = wait_for(db, job_id, timeout=timeout)
            except WaitTimeoutError as exc:
                failures.append(f"{job_id}: {exc}")
                return
            took = time.monotonic() - began
            if result.state.value != "completed":
                failures.append(f"{job_id}: ended {result.state.value}")
            elif took > timeout / 2:  # the read at the timeout found it: nothing was heard
                failures.append(f"{job_id}: seen {took:.1f}s after the wait began")

        threads = [
            threading.Thread(target=wait_one, args=(i, at + rng.uniform(-0.03, 0.03)))
            for i in job_ids
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return failures
