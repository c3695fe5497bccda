"""Where jobs go: the executors' free places, and which executor may take which job.

The executor set's answers to the producer and the pool: idle places (an executor once per
free slot), the place of a job's kind (an ``async def`` worker's jobs go to async executors
only, a sync worker's to process or thread executors), the code version and workers a claim
is for, and the running jobs' deadlines and leases.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any

from kickside_engine.models import ClaimedJob
from kickside_engine.runtime.executors import EXECUTOR_KINDS, Executor


class Placement:
    """The read side of :class:`~kickside_engine.runtime.executor_set.ExecutorSet`."""

    def __init__(self) -> None:
        self.executors: list[Executor] = []
        #: Per queue, the jobs that may run at once on the executors: an async executor counts
        #: each of its jobs, a process executor one for all its jobs of the queue (it runs them
        #: one after another). The producer counts them in as it assigns them
        #: (:meth:`take_place`), the executor set counts them out (:meth:`release`).
        self.running_by_queue: Counter[str] = Counter()
        #: Per queue, the jobs on the executors (running, or waiting in a batch).
        self.jobs_by_queue: Counter[str] = Counter()
        #: Jobs handed to a process executor that did not start there (it died or was killed,
        #: or they were dropped for new code): the producer puts them back in its buffer.
        self.returned: list[ClaimedJob] = []
        #: The ``async def`` workers, as the executors reported them.
        self.async_workers: set[str] = set()
        #: No running execution's deadline (or cancel's) is before this: lowered as jobs
        #: start and cancels go out, raised only by a scan of them all (so it may be early,
        #: never late). The loop reads it each turn; scanning every job there cost several
        #: microseconds per job with ten executors.
        self.next_deadline = math.inf

    def batch_size(self) -> int:
        """How many jobs an idle process executor may be handed at once."""
        return 1

    def idle(self) -> list[Executor]:
        """The places for a job now: an async executor once per free slot, an idle process
        executor once per job of a batch (:meth:`batch_size`); every executor's first place
        before any executor's second, so that jobs spread before they queue."""
        batch = self.batch_size()
        free = [
            (ex, ex.free_slots if ex.is_async else batch * ex.free_slots) for ex in self.executors
        ]
        most = max((n for _, n in free), default=0)
        return [ex for depth in range(most) for ex, n in free if n > depth]

    def take_place(self, idle: list[Executor], claimed: ClaimedJob, limit: int) -> Executor | None:
        """Take from ``idle`` a place for ``claimed`` and count it in its queue's concurrency
        (``limit``): a place of the kind its worker runs on (any, for a worker no executor
        knows: it reports the job back as unknown), on an executor that already holds a job of
        its queue when the queue has no room for one more."""
        queue = claimed.job.queue
        wanted = self._kind(claimed.job.worker)
        room = self.running_by_queue[queue] < limit
        for i, ex in enumerate(idle):
            if wanted is not None and ex.is_async != wanted:
                continue
            if room or (not ex.is_async and ex.held[queue] > 0):
                del idle[i]
                self.jobs_by_queue[queue] += 1
                if ex.hold(queue):
                    self.running_by_queue[queue] += 1
                return ex
        return None

    def release(self, ex: Executor, queue: str) -> None:
        """Count a job of ``queue`` out of ``ex`` (it ended, or goes back to the buffer)."""
        self.jobs_by_queue[queue] -= 1
        if ex.release(queue):
            self.running_by_queue[queue] -= 1

    def any_place_for(self, jobs: Iterable[ClaimedJob]) -> bool:
        """Whether one of ``jobs`` has an idle executor of its kind now."""
        kinds = {ex.is_async for ex in self.executors if ex.idle}
        if len(kinds) != 1:
            return bool(kinds)  # both kinds free, or none
        return any(self._kind(c.job.worker) in (None, *kinds) for c in jobs)

    def _kind(self, worker: str) -> bool | None:
        """Whether ``worker`` runs on async executors (None: no executor knows it)."""
        if worker in self.async_workers:
            return True
        return False if any(worker in ex.infos for ex in self.executors) else None

    def busy(self) -> int:
        """How many executors run a job."""
        return sum(1 for ex in self.executors if ex.jobs)

    def by_kind(self) -> list[dict[str, Any]]:
        """The executors by kind, as nodes publish them: how many, and busy and total slots
        (a retiring executor counts until it is gone, as it still runs its jobs)."""
        executors: Counter[str] = Counter()
        busy: Counter[str] = Counter()
        slots: Counter[str] = Counter()
        for ex in self.executors:
            executors[ex.kind] += 1
            busy[ex.kind] += min(len(ex.jobs), ex.slots)
            slots[ex.kind] += ex.slots
        return [
            {"kind": kind, "executors": executors[kind], "busy": busy[kind], "slots": slots[kind]}
            for kind in EXECUTOR_KINDS
            if executors[kind]
        ]

    def places(self) -> int:
        """How many jobs the executors that take new work run at once: one per process or
        thread executor, ``slots`` per async executor (retiring executors take no more)."""
        return sum(ex.slots for ex in self.executors if not ex.retiring)

    def any_idle(self) -> bool:
        """Whether some executor may take a job now."""
        return any(ex.idle for ex in self.executors)

    def any_ready(self) -> bool:
        """Whether some executor has loaded the app."""
        return any(ex.ready for ex in self.executors)

    def any_current(self) -> bool:
        """Whether some executor has loaded the app and is not retiring."""
        return any(ex.ready and not ex.retiring for ex in self.executors)

    def earliest_deadline(self) -> float:
        """The earliest deadline of the running executions and of the cancels sent, by a scan
        of them all (``inf`` with none)."""
        return min(
            (
                job.deadline if job.cancel_by is None else job.cancel_by
                for ex in self.executors
                for job in ex.jobs.values()
            ),
            default=math.inf,
        )

    def held_leases(self) -> list[uuid.UUID]:
        """The lease tokens of the jobs on executors, and of those they handed back."""
        return [
            job.claimed.lease_token
            for ex in self.executors
            for job in ex.jobs.values()
            if not job.lost
        ] + [claimed.lease_token for claimed in self.returned]

    def claim_version(self, idle: list[Executor]) -> str | None:
        """The code version claimed jobs will run under: the newest generation's."""
        ready = [ex for ex in self.executors if ex.ready and not ex.retiring] or idle
        return max(ready, key=lambda ex: ex.generation).version if ready else None

    def claim_workers(self, idle: list[Executor]) -> list[str]:
        """The workers of the code claimed jobs will run under (the newest generation's); none
        before an executor has loaded it."""
        ready = [ex for ex in self.executors if ex.ready and not ex.retiring] or idle
        if not ready:
            return []
        newest = max(ex.generation for ex in ready)
        # Only workers an executor of theirs can run: with places free, of the free kinds.
        kinds = {ex.is_async for ex in (idle or ready)}
        return sorted(
            {
                w
                for ex in ready
                if ex.generation == newest
                for w in ex.infos
                if (w in self.async_workers) in kinds
            }
        )
