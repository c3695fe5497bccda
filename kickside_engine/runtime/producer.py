"""The producer: keeps the pool's executors fed.

It decides what to claim (a :class:`ClaimPlan` per turn), runs turns (record the outcomes the
executors produced, claim the next jobs) and hands what it claimed to idle executors, keeping
the rest in the prefetch buffer. While executors are busy a turn runs on a store thread of its
own, one at a time, so the supervisor loop goes on taking results and starting prefetched jobs
during the round trip; on an idle pool it runs on the loop's thread, a hand-off sooner.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from kickside_engine.clock import utcnow
from kickside_engine.models import ClaimedJob
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.runtime.executor_set import ExecutorSet
from kickside_engine.runtime.executors import Executor
from kickside_engine.runtime.prefetch import (
    PREFETCH_BELOW_MS,
    PrefetchBuffer,
    prefetch_limit,
)
from kickside_engine.runtime.supervision import LeaseKeeper
from kickside_engine.runtime.turns import ClaimPlan, Turn, TurnResult, TurnRunner
from kickside_engine.store.database import Database


class Producer:
    """Claims jobs for the executor set and records its outcomes, a turn at a time.

    The pool owns it and calls :meth:`flush_and_claim` at every step. It reads the executor
    set (idle executors, code versions, jobs running per queue, outcomes waiting) and starts
    jobs there; :attr:`claim_wanted` is raised by whoever learns there may be something to
    claim (a freed executor, a wake-up, the poll timer, a resumed queue).
    """

    def __init__(
        self,
        db: Database,
        config: PoolConfig,
        node: str,
        *,
        executors: ExecutorSet,
        leases: LeaseKeeper,
        stats: Counter[str],
        stopping: threading.Event,
        wake: Callable[[], None],
    ) -> None:
        self.config = config
        self.node = node
        self.executors = executors
        self.leases = leases
        self.stats = stats
        self.stopping = stopping
        #: Called when a turn on the store thread is done, to wake the loop that applies it.
        self.wake = wake
        #: Runs the turns (the one attribute a turn on the store thread touches).
        self.turns = TurnRunner(db, config, node)
        #: Claimed but not yet handed to an executor (see ``PoolConfig.prefetch``): dispatched
        #: the moment an executor frees up, without waiting for a database round trip.
        self.buffer = PrefetchBuffer()
        #: Whether the next turn should claim (it may find nothing).
        self.claim_wanted = True
        #: Queues paused by an operator: not claimed from.
        self.paused: set[str] = set()
        #: Turns that reached the database and came back (a step that counted one proves the
        #: database is there).
        self.round_trips = 0
        self._turn_ms = 0.0  # moving average of claiming turns, from start to applied
        self._store: ThreadPoolExecutor | None = None
        self._turn: tuple[Turn, Future[TurnResult]] | None = None

    # -- life -------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the store thread: turns run there from now on while executors are busy."""
        self._store = ThreadPoolExecutor(1, thread_name_prefix=f"kickside-store-{self.node}")

    def stop(self) -> None:
        """Stop the store thread (a turn in flight finishes its statement) and close the turn
        connection."""
        if self._store is not None:
            self._store.shutdown(wait=True)
        self.turns.close_connection()

    def release_connection(self) -> None:
        """Close the turn connection unless a turn runs on it: kept from turn to turn through
        an outage, it would meet the database's return already dead."""
        if self._turn is None:
            self.turns.close_connection()

    @property
    def turn_running(self) -> bool:
        """Whether a turn runs on the store thread (or waits to be applied)."""
        return self._turn is not None

    def urgent(self) -> bool:
        """Whether there is something to do for an idle executor now: a claim to start, or a
        prefetched job that may start."""
        return (self.claim_wanted and self._turn is None) or (
            self.buffer.dispatchable(self.executors.running_by_queue, self.config.queues)
            and self.executors.any_place_for(self.buffer)
        )

    def set_paused(self, paused: set[str]) -> None:
        """The queues an operator paused, as the last heartbeat read them."""
        if paused != self.paused:
            self.paused = paused
            self.claim_wanted = True

    def drop_lost(self, lost: set[uuid.UUID]) -> None:
        """Forget prefetched jobs whose lease is gone (cancelled or rescued)."""
        self.buffer.drop(lost)

    # -- turns ------------------------------------------------------------------------------

    def flush_and_claim(self) -> None:
        """Dispatch prefetched jobs, then start the next turn (record outcomes, claim) if due.

        One turn at a time. While executors are busy it runs on the store thread, so results
        keep arriving and prefetched jobs keep starting during its round trip; on an idle pool
        it runs right here, a thread hand-off sooner.
        """
        self.collect()
        if self.executors.returned:
            self.buffer.put_back(self.executors.returned)
            self.executors.returned.clear()
        idle = self.executors.idle()
        if self.buffer and idle:
            self.executors.dispatch(self._from_buffer(idle), utcnow())
        if self._turn is not None:
            return
        if self.stopping.is_set():
            idle = []
        want_claim = self.claim_wanted and (bool(idle) or self.prefetching())
        pending = self.executors.pending
        if not pending and not want_claim:
            return
        turn = Turn(
            pending=list(pending),
            plan=self._plan(idle) if want_claim else None,
            version=self.executors.claim_version(idle),
            workers=self.executors.claim_workers(idle),
        )
        if want_claim:
            self.claim_wanted = False  # set again by what happens while the turn runs
        if self._store is not None and self.executors.busy():
            future = self._store.submit(self.turns.run, turn)
            self._turn = (turn, future)
            future.add_done_callback(lambda _f: self.wake())
        else:
            self._apply(turn, self.turns.run(turn))

    def collect(self, *, wait: bool = False) -> None:
        """Apply the store thread's finished turn (``wait``: wait for it first)."""
        if self._turn is None:
            return
        turn, future = self._turn
        if not wait and not future.done():
            return
        self._turn = None
        self._apply(turn, future.result())

    def _apply(self, turn: Turn, done: TurnResult) -> None:
        """Take a turn's outcome in: drop what was recorded, start what was claimed.

        Claims committed before a failure are started all the same; the failure is raised
        after, for the pool's backoff.
        """
        del self.executors.pending[: done.settled]
        if done.error is None:
            self.round_trips += 1
        if turn.plan is not None and done.error is None:
            took_ms = (time.monotonic() - turn.began) * 1000
            self._turn_ms += (took_ms - self._turn_ms) * 0.2
        idle = self.executors.idle()
        if turn.version != self.executors.claim_version(idle):
            # Executors were upgraded while the turn ran: its runs say the old code version
            # until they start (see ExecutorSet.upgrade).
            self.executors.restamp_on_start(
                c.lease_token for _, batch in done.batches for c in batch
            )
        assigned: list[tuple[Executor, ClaimedJob]] = []
        for queue, batch in done.batches:
            self._assign(queue, batch, idle, assigned, done.since)
        self.executors.dispatch(assigned, done.now)
        if turn.plan is not None:
            self.claim_wanted = self.claim_wanted or done.full or done.error is not None
        if done.error is not None:
            raise done.error

    # -- claims -----------------------------------------------------------------------------

    def _plan(self, idle: list[Executor]) -> ClaimPlan:
        """Queues to claim from, in random order, each with its share, and the room for all.

        A queue's share is what its concurrency leaves free (times the jobs a process executor
        takes at once), plus, while prefetching, the prefetch limit to wait here; all queues
        together take no more than the idle places plus the prefetch buffer's free places
        (``room``), each from what the queues before it left.
        """
        prefetching = self.prefetching()
        limit = self.prefetch_limit()
        batch = self.executors.batch_size()
        room = len(idle) + (limit - len(self.buffer) if prefetching else 0)
        shares: list[tuple[str, int]] = []
        queues = list(self.config.queues)
        random.shuffle(queues)
        on_executors = self.executors.jobs_by_queue
        for queue in queues:
            if queue in self.paused:
                continue
            held = on_executors[queue] + self.buffer.by_queue[queue]
            share = self.config.queues[queue] * batch + (limit if prefetching else 0) - held
            if share > 0:
                shares.append((queue, share))
        return ClaimPlan(shares=shares, room=room)

    def prefetching(self) -> bool:
        """Whether to claim ahead of free executors: only while jobs are fast, and only up
        to :meth:`prefetch_limit` jobs waiting here."""
        return (
            self.prefetch_limit() > len(self.buffer)
            and self.executors.recent_ms < PREFETCH_BELOW_MS
            and not self.stopping.is_set()
            and self.executors.any_current()
        )

    def prefetch_limit(self) -> int:
        """How many claimed jobs may wait here now (see :func:`prefetch_limit`)."""
        # The places that run jobs, not the process executors: an async-only pool has none of
        # those, and prefetched nothing, its turns' round trips leaving every slot idle.
        places = min(self.executors.places(), sum(self.config.queues.values()))
        return prefetch_limit(
            places,
            self.config.prefetch,
            self._turn_ms,
            self.executors.recent_ms,
        )

    def _assign(
        self,
        queue: str,
        batch: list[ClaimedJob],
        idle: list[Executor],
        assigned: list[tuple[Executor, ClaimedJob]],
        since: float,
    ) -> None:
        """Hand claimed jobs to idle executors, within the queue's concurrency; keep the rest.

        ``since``: the monotonic time just before the claim, from which the lease runs.
        """
        limit = self.config.queues[queue]
        for job in batch:
            self.leases.track(job.lease_token, since, self.config.lease_for(queue))
            ex = self.executors.take_place(idle, job, limit) if idle else None
            if ex is not None:
                assigned.append((ex, job))
            else:
                self.buffer.add(job)

    def _from_buffer(self, idle: list[Executor]) -> list[tuple[Executor, ClaimedJob]]:
        """Prefetched jobs for the idle executors, oldest first, within each queue's limit."""
        assigned: list[tuple[Executor, ClaimedJob]] = []
        # (queue, worker) with no place now: places are only taken from here on, so their
        # later jobs find none either.
        blocked: set[tuple[str, str]] = set()
        for claimed in list(self.buffer):
            if not idle:
                break
            job = claimed.job
            if (job.queue, job.worker) in blocked:
                continue
            ex = self.executors.take_place(idle, claimed, self.config.queues[job.queue])
            if ex is None:
                blocked.add((job.queue, job.worker))  # it waits, later jobs may go
                continue
            self.buffer.remove(claimed)
            self.stats["prefetched"] += 1
            assigned.append((ex, claimed))
        return assigned
