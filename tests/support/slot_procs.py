"""Work done in child processes by the multi-process race tests.

Children are started with the ``spawn`` method, so every function here is module-level and
takes only picklable arguments (the database URL and schema, ids as strings). Each task opens
the database for its own length and disposes of it at the end.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.pool
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime

from kickside_engine import (
    ClaimedJob,
    Database,
    JobBuilder,
    JobState,
    claim,
    complete,
    connect_database,
    get_job_statuses,
)
from kickside_engine.clock import utcnow
from kickside_engine.slots import enqueue_slot, nudge_workers, wake_job, wake_multi

TASK_DEADLINE_S = 60.0
Identity = tuple[str, str, str]


def spawn_pool(processes: int) -> multiprocessing.pool.Pool:
    """A pool of freshly spawned interpreters (no state inherited from the test process)."""
    return multiprocessing.get_context("spawn").Pool(processes)


def wait_for(condition: Callable[[], bool], *, timeout_s: float = 20.0, what: str = "") -> None:
    """Poll ``condition`` until it holds; fail after ``timeout_s`` (a bound, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.002)


@contextlib.contextmanager
def _open(url: str, schema: str | None) -> Iterator[Database]:
    db = connect_database(url, schema=schema)
    try:
        yield db
    finally:
        db.dispose()


def _claim_one(db: Database, queue: str, node: str, deadline: float) -> ClaimedJob:
    """Claim one job of ``queue``, retrying while another process holds its row."""
    while time.monotonic() < deadline:
        claimed = claim(db, queue=queue, node=node, limit=1)
        if claimed:
            return claimed[0]
        time.sleep(0.002)
    raise TimeoutError(f"{node} could not claim a job of {queue}")


def run_capacity_jobs(
    url: str, schema: str | None, queue: str, job_ids: Sequence[str], node: str, seed: int
) -> list[tuple[str, datetime]]:
    """Claim and complete jobs of ``queue`` until every one of ``job_ids`` is completed.

    Each job is held for a short random time. Returns ``(job_id, admitted_at)`` per job this
    child ran, ``admitted_at`` read right after the claim committed (so it is never earlier
    than the admission decision, unlike the claim's own ``now``).
    """
    rng = random.Random(seed)
    ran: list[tuple[str, datetime]] = []
    deadline = time.monotonic() + TASK_DEADLINE_S
    with _open(url, schema) as db:
        while time.monotonic() < deadline:
            claimed = claim(db, queue=queue, node=node, limit=1)
            if not claimed:
                states = get_job_statuses(db, job_ids)
                if all(s is JobState.COMPLETED for s in states.values()):
                    return ran
                time.sleep(rng.uniform(0.005, 0.02))  # poll again; spread the claimers out
                continue
            admitted_at = utcnow()
            time.sleep(rng.uniform(0.005, 0.025))  # the job's work
            if not complete(db, claimed[0]):
                raise RuntimeError(f"lost the lease of {claimed[0].job.id}")
            ran.append((str(claimed[0].job.id), admitted_at))
    raise TimeoutError(f"{node}: jobs of {queue} were still running at the deadline")


def fan_out(
    url: str,
    schema: str | None,
    own_job_id: str,
    own_queue: str,
    key_pool: Sequence[Identity],
    iterations: int,
    seed: int,
) -> dict[Identity, int]:
    """Run this child's own slot ``iterations`` times, each completion fanning out demand.

    Every completion commits together with a :func:`wake_multi` over a random subset of
    ``key_pool`` (which overlaps with the other children's sets, including their own slots),
    given in a random order. Returns how many fan-outs named each key.
    """
    rng = random.Random(seed)
    named: Counter[Identity] = Counter()
    node = f"fanout:{own_queue}"
    deadline = time.monotonic() + TASK_DEADLINE_S
    with _open(url, schema) as db:
        for _ in range(iterations):
            wake_job(db, own_job_id, control=True)
            claimed = _claim_one(db, own_queue, node, deadline)
            keys = rng.sample(list(key_pool), rng.randint(2, min(6, len(key_pool))))
            with db.begin() as conn:
                wake_multi(db, keys, conn=conn, completion_job_id=own_job_id)
                if not complete(db, claimed, conn=conn):
                    raise RuntimeError(f"lost the lease of {own_job_id}")
            nudge_workers(db)
            named.update(keys)
    return dict(named)


def demand(url: str, schema: str | None, job_id: str, times: int, control: bool = False) -> int:
    """Wake one job ``times`` times, each wake its own transaction; returns how many woke."""
    with _open(url, schema) as db:
        return sum(wake_job(db, job_id, control=control).woke for _ in range(times))


def enroll(
    url: str, schema: str | None, identities: Sequence[Identity], seed: int
) -> list[tuple[Identity, str, bool]]:
    """Enroll every identity with demand, in a random order; returns (identity, id, duplicate)."""
    order = list(identities)
    random.Random(seed).shuffle(order)
    out = []
    with _open(url, schema) as db:
        for ns, scope, key in order:
            inserted = enqueue_slot(db, JobBuilder("ok", {}).slot(ns, scope, key, demand=True))
            out.append(((ns, scope, key), str(inserted.id), inserted.duplicate))
    return out
