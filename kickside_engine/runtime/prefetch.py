"""Prefetching: claimed jobs that wait in the pool for an executor, and how many may.

A turn (a database round trip) takes long next to a fast job; executors with nothing waiting
here sit idle through it. So while executions are fast the producer claims ahead, and a job in
the buffer starts the moment an executor frees up.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter, deque
from collections.abc import Iterator, Mapping

from kickside_engine.models import ClaimedJob

#: Prefetch only while executions average under this: for slower jobs a round trip is noise,
#: and a prefetched job would wait behind them.
PREFETCH_BELOW_MS = 20
#: Without ``PoolConfig.prefetch``, the buffer holds from 2 to 96 jobs per place: as many as
#: the executors get through during one turn (see :func:`prefetch_limit`). The upper bound only
#: binds for jobs of about a millisecond or less, where each turn's claims are what the
#: executors run until the next turn is back. A turn costs less per job the more it carries (its
#: round trip and commit are paid once), so the bigger bound made bigger, cheaper turns: a
#: no-op drain with process executors ran 1.38x faster with 48 than with 12 on PostgreSQL, and
#: 1.14x faster with 96 than with 24 on SQLite, with less CPU per job (``bench.ab``,
#: 2026-12-07 evening, in docs/about/performance.md).
PREFETCH_PER_PLACE = (2, 96)
#: The most jobs a pool's buffer holds, whatever its places: a pool with 200 async slots and
#: jobs of a millisecond would otherwise hold 19,200 claimed jobs under its leases, all of
#: them waiting out a lease if it is killed.
PREFETCH_MOST = 1_000
#: How many jobs an idle process executor is handed at once while executions are fast (see
#: ``PoolConfig.handoff_batch``): one message there, and no round trip through the supervisor
#: between them. Batches of four, each result sent as its job ends, drained no-op jobs 1.17x
#: faster on PostgreSQL and 1.21x on SQLite, with 0.66x and 0.75x the pool's CPU per job
#: (``bench/results/ab-2026-12-03T17-51-57Z.md``); batches of 8 and 16 gained nothing more.
HANDOFF_BATCH = 4
#: Batch only while executions average under this: a job queued behind a slower one waits for
#: it, and for jobs of a millisecond or more the hand-off is a small part of the cost.
BATCH_BELOW_MS = 1.0
#: What handing a job to an executor and taking its result back costs at least, in ms: the
#: shortest execution :func:`prefetch_limit` counts with.
HANDOFF_MS = 0.5


def prefetch_limit(places: int, configured: int | None, turn_ms: float, execution_ms: float) -> int:
    """How many claimed jobs may wait for an executor: ``configured`` when set, else enough
    to keep every place busy through one database turn of ``turn_ms``, given executions of
    ``execution_ms`` (counted as at least :data:`HANDOFF_MS`), within
    :data:`PREFETCH_PER_PLACE` per place and :data:`PREFETCH_MOST` in all. A place runs one
    job at a time: a process executor is one, an async executor one per slot.

    A turn is a round trip and a commit, whatever the batch: while it runs, executors that
    have nothing buffered sit idle. A drain timeline with twice the executors buffered showed
    them idle for most of every turn; six times was 1.6x the throughput. With twelve per place
    at most, a no-op drain's turns (78 jobs, 14 ms) came back to executors that had all been
    idle for part of it, their buffer empty: the turns were the drain's pace.
    """
    if configured is not None:
        return configured
    low, high = PREFETCH_PER_PLACE
    per_place = math.ceil(turn_ms / max(execution_ms, HANDOFF_MS))
    return min(places * max(low, min(high, per_place)), max(PREFETCH_MOST, places * low))


class PrefetchBuffer:
    """Claimed jobs not yet handed to an executor, oldest first, and their count per queue.

    Their leases are held (and renewed) like those of running jobs; the producer fills the
    buffer and empties it into idle executors.
    """

    def __init__(self) -> None:
        self.jobs: deque[ClaimedJob] = deque()
        #: How many of :attr:`jobs` each queue has (a queue's share counts them as held).
        self.by_queue: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self) -> Iterator[ClaimedJob]:
        return iter(self.jobs)

    def add(self, claimed: ClaimedJob) -> None:
        """Keep ``claimed`` until an executor of its queue is free."""
        self.jobs.append(claimed)
        self.by_queue[claimed.job.queue] += 1

    def put_back(self, jobs: list[ClaimedJob]) -> None:
        """Put jobs an executor handed back first in line, in their order."""
        for claimed in reversed(jobs):
            self.jobs.appendleft(claimed)
            self.by_queue[claimed.job.queue] += 1

    def remove(self, claimed: ClaimedJob) -> None:
        """Take ``claimed`` out: it starts, or its lease is gone."""
        self.jobs.remove(claimed)
        self.by_queue[claimed.job.queue] -= 1

    def drop(self, lost: set[uuid.UUID]) -> None:
        """Forget the jobs whose lease is in ``lost`` (cancelled or rescued): never start them."""
        for claimed in [c for c in self.jobs if c.lease_token in lost]:
            self.remove(claimed)

    def tokens(self) -> list[uuid.UUID]:
        """The lease tokens of the jobs waiting here."""
        return [claimed.lease_token for claimed in self.jobs]

    def dispatchable(self, running: Counter[str], limits: Mapping[str, int]) -> bool:
        """Whether a job here may start now: its queue runs fewer than its limit."""
        # Per queue, not per buffered job: the loop asks this at every wait.
        return any(n > 0 and running[queue] < limits[queue] for queue, n in self.by_queue.items())
