"""The pool supervisor: claims due jobs, hands them to executors, keeps their leases alive,
records outcomes, and upgrades executors in place.

One supervisor thread does all of this in a loop, waiting on executor pipes, a self-pipe (local
inserts, PostgreSQL notifications, signals) and timers. Outcomes that arrive together are
recorded in one transaction together with the next claim (a *turn*), so throughput is not bound
to one commit per job; an outcome not yet recorded when the pool dies means a re-run, never a
loss. While executors are busy a turn runs on a store thread of its own, one at a time, so the
loop goes on taking results and starting prefetched jobs during the round trip.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import selectors
import socket
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta

from sqlalchemy.exc import DBAPIError

from kickside_engine.api import node_name
from kickside_engine.backoff import DEFAULT_BACKOFF
from kickside_engine.clock import utcnow
from kickside_engine.errors import (
    ConfigurationError,
    KicksideError,
    PermissionDeniedError,
    PoolFailedError,
)
from kickside_engine.execution import max_execution, timeout_result
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.models import ClaimedJob
from kickside_engine.plugins.cron import SchedulePublication
from kickside_engine.runtime.app import WorkerInfo, code_version
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.runtime.executors import (
    Executor,
    ProcessExecutor,
    ThreadExecutor,
    receive,
)
from kickside_engine.runtime.job_log import log_start, log_stop, starts_logged
from kickside_engine.runtime.prefetch import PREFETCH_BELOW_MS, PrefetchBuffer, prefetch_limit
from kickside_engine.runtime.supervision import LeaseKeeper, PluginThread
from kickside_engine.runtime.turns import ClaimPlan, Turn, TurnResult, TurnRunner
from kickside_engine.runtime.wakeups import Wakeups, restore_signals, route_signals
from kickside_engine.store.claims import (
    restamp_run,
)
from kickside_engine.store.database import Database
from kickside_engine.store.grants import worker_permission_error
from kickside_engine.store.listen import Subscription, listen
from kickside_engine.store.nodes import NodeBeat, deregister, heartbeat
from kickside_engine.store.notify import local_signal
from kickside_engine.store.reconnect import Outage
from kickside_engine.store.settle import (
    Settlement,
)
from kickside_engine.wire import decode_result

__all__ = ["PoolConfig", "PoolFailedError", "WorkerPool"]  # importable from here, as before

log = logging.getLogger("kickside.pool")


class WorkerPool:
    """A supervised worker pool. ``run()`` blocks; ``start()``/``stop()`` run it on a thread."""

    def __init__(self, db: Database, config: PoolConfig) -> None:
        self.db = db
        self.config = config
        self.node = config.node or node_name()
        self.host = socket.gethostname()
        self.started_at = utcnow()
        self.generation = 0
        self.executors: list[Executor] = []
        self.running_by_queue: Counter[str] = Counter()
        #: Claimed but not yet handed to an executor (see ``PoolConfig.prefetch``): dispatched
        #: the moment an executor frees up, without waiting for a database round trip.
        self.buffer = PrefetchBuffer()
        self._recent_ms = float(PREFETCH_BELOW_MS)  # moving average of execution times
        self._turn_ms = 0.0  # moving average of claiming turns, from start to applied
        self._restamp: set[uuid.UUID] = set()
        self.paused: set[str] = set()
        self.pending: list[Settlement] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.wakeups = Wakeups()
        #: Executor pipes (data: the executor) and the self-pipe (data: None), registered
        #: once: building a selector per wait cost more than the rest of the wait.
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.wakeups.fileno(), selectors.EVENT_READ, None)
        self._claim_wanted = True
        self._next_poll = 0.0
        self._next_beat = 0.0
        #: Database trouble: backoff, and one log line when it goes and one when it is back.
        self._outage = Outage(log)
        #: Round trips that succeeded (heartbeats, turns): a step that made one proves the
        #: database is there; a step that only handed work to the store thread does not.
        self._round_trips = 0
        #: Runs turns while executors are busy (see :meth:`_flush_and_claim`).
        self._store: ThreadPoolExecutor | None = None
        self._turn: tuple[Turn, Future[TurnResult]] | None = None
        self.turns = TurnRunner(db, config, self.node)
        self.leases = LeaseKeeper(db, self.node, config.lease)
        #: The cron entries this node runs, published on every heartbeat (none without plugins).
        self._schedule = SchedulePublication(config.schedule if config.run_plugins else ())
        self.stats: Counter[str] = Counter()
        self.ready = threading.Event()
        #: The error that ended :meth:`run` (a bug, or what stopped the pool, such as an app
        #: that executors could not load), if one did; :meth:`stop` raises it for a pool run on
        #: a thread.
        self.error: BaseException | None = None
        #: Why the pool stopped itself (it then stops gracefully, and :meth:`run` raises this).
        self.failure: KicksideError | None = None
        self._prepared = False
        self.version = config.code_version or (
            code_version(config.app) if config.mode == "thread" else "pending"
        )

    # -- wake-ups ---------------------------------------------------------------------------

    def request_stop(self) -> None:
        """Ask the pool to shut down gracefully (what SIGTERM and SIGINT do)."""
        self._stop.set()
        self.wakeups.poke("stop")

    def request_upgrade(self) -> None:
        """Replace executors with ones on the current code (what SIGHUP does)."""
        self.wakeups.poke("reload")

    # -- executors --------------------------------------------------------------------------

    def _spawn(self) -> Executor:
        if self.config.mode == "process":
            assert self.config.app is not None
            ex: Executor = ProcessExecutor(self.config.app, self.generation)
        else:
            registry = self.config.registry
            if registry is None:
                from kickside_engine.runtime.app import load_registry

                registry = load_registry(self.config.app or "")
            ex = ThreadExecutor(registry, self.version, self.generation)
        self.executors.append(ex)
        self._selector.register(ex.conn.fileno(), selectors.EVENT_READ, ex)
        return ex

    def _retire(self, ex: Executor, *, kill: bool = False) -> None:
        if ex in self.executors:
            self.executors.remove(ex)
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(ex.conn.fileno())  # before its pipe closes
        if kill:
            ex.kill()
        else:
            ex.stop()
            ex.join(5)

    def _upgrade(self) -> None:
        self.generation += 1
        # Prefetched jobs were claimed for the old code but will start on the new: their runs
        # get the version they really run under when they start.
        self._restamp.update(self.buffer.tokens())
        log.info("upgrading executors in place", extra={"generation": self.generation})
        for ex in list(self.executors):
            if ex.running is None:
                self._retire(ex)
                self._spawn()
            else:
                ex.retiring = True  # finishes its job under the code it started with

    def _replace(self, ex: Executor, *, kill: bool) -> None:
        self._retire(ex, kill=kill)
        if not self._stop.is_set():
            self._spawn()

    # -- results ----------------------------------------------------------------------------

    def _info(self, ex: Executor, worker: str) -> WorkerInfo | None:
        info = ex.infos.get(worker)
        return info if isinstance(info, WorkerInfo) else None

    def _finish(self, ex: Executor, result: ExecutionResult) -> None:
        claimed = ex.running
        if claimed is None:
            return
        info = self._info(ex, claimed.job.worker)
        backoff = info.backoff_for(claimed.job.is_slot) if info is not None else DEFAULT_BACKOFF
        self.pending.append(settlement_for(claimed, result, backoff=backoff))
        ex.running = None
        ex.deadline = None
        self.running_by_queue[claimed.job.queue] -= 1
        self.leases.forget(claimed.lease_token)
        self.stats[result.kind.value] += 1
        self._recent_ms += (result.duration_ms - self._recent_ms) * 0.1
        self._claim_wanted = True
        log_stop(claimed, result)
        if ex.retiring:
            self._replace(ex, kill=False)

    def _receive(self, ex: Executor) -> None:
        try:
            message = receive(ex.conn)
        except (EOFError, OSError):
            self._executor_died(ex)
            return
        kind = message[0]
        if kind == "ready":
            ex.version, ex.infos = message[1], message[2]
            if self.config.mode == "process":
                self.version = ex.version or self.version
            self._claim_wanted = True
        elif kind == "result":
            if ex.running is not None and message[1] == ex.running.lease_token.int:
                self._finish(ex, decode_result(message[2]))
        elif kind == "failed":
            log.error("executor could not load the app: %s", message[1])
            if self.failure is None:
                self.failure = ConfigurationError(
                    f"executors could not load the app {self.config.app!r}: {message[1]}"
                )
            self._retire(ex, kill=True)
            self.request_stop()

    def _executor_died(self, ex: Executor) -> None:
        claimed = ex.running
        if claimed is not None:
            started = ex.started_monotonic
            self._finish(
                ex,
                ExecutionResult(
                    ResultKind.CRASH,
                    utcnow(),
                    int((time.monotonic() - started) * 1000),
                    error="crash: the executor process running this attempt died "
                    f"(exit code {getattr(getattr(ex, 'process', None), 'exitcode', None)})",
                ),
            )
        self._replace(ex, kill=True)

    def _check_deadlines(self, now_mono: float) -> None:
        for ex in list(self.executors):
            if ex.running is not None and ex.deadline is not None and now_mono >= ex.deadline:
                claimed = ex.running
                limit = self._max_execution(ex, claimed)
                self._finish(ex, timeout_result(limit, ex.started_monotonic))
                self._replace(ex, kill=True)

    def _max_execution(self, ex: Executor, claimed: ClaimedJob) -> timedelta:
        info = self._info(ex, claimed.job.worker)
        timeout = info.timeout if info is not None else None
        return max_execution(claimed.job, timeout, self.config.default_max_execution)

    def _stop_lost(self, lost: set[uuid.UUID]) -> None:
        """Stop executions whose lease is gone (cancelled or rescued): never record them.

        An executor whose result already waits in its pipe has finished: that result is taken
        (the fenced settle drops it) rather than the executor killed. After a stop signal the
        wait for results can return empty although one is waiting (epoll is not restarted).
        """
        for ex in list(self.executors):
            while self._lost_job_waiting(ex, lost):
                self._receive(ex)
            if ex in self.executors and ex.running is not None and ex.running.lease_token in lost:
                claimed = ex.running
                log.warning("lease lost, stopping execution", extra={"job_id": str(claimed.job.id)})
                self.running_by_queue[claimed.job.queue] -= 1
                self.leases.forget(claimed.lease_token)
                ex.running = None
                self._replace(ex, kill=True)
        self.buffer.drop(lost)

    def _lost_job_waiting(self, ex: Executor, lost: set[uuid.UUID]) -> bool:
        """Whether ``ex`` runs a job of ``lost`` and a message from it waits unread."""
        if ex not in self.executors or ex.running is None or ex.running.lease_token not in lost:
            return False
        try:
            return ex.conn.poll(0)
        except (OSError, EOFError):
            return False

    # -- claims ---------------------------------------------------------------------------

    def _flush_and_claim(self) -> None:
        """Dispatch prefetched jobs, then start the next turn (record outcomes, claim) if due.

        One turn at a time. While executors are busy it runs on the store thread, so results
        keep arriving and prefetched jobs keep starting during its round trip; on an idle pool
        it runs right here, a thread hand-off sooner.
        """
        self._collect_turn()
        idle = [ex for ex in self.executors if ex.idle]
        if self.buffer and idle:
            self._dispatch(self._from_buffer(idle), utcnow())
        if self._turn is not None:
            return
        if self._stop.is_set():
            idle = []
        want_claim = self._claim_wanted and (bool(idle) or self._prefetching())
        if not self.pending and not want_claim:
            return
        turn = Turn(
            pending=list(self.pending),
            plan=self._plan(idle) if want_claim else None,
            version=self._claim_version(idle),
            workers=self._claim_workers(idle),
        )
        if want_claim:
            self._claim_wanted = False  # set again by what happens while the turn runs
        if self._store is not None and any(ex.running is not None for ex in self.executors):
            future = self._store.submit(self.turns.run, turn)
            self._turn = (turn, future)
            future.add_done_callback(lambda _f: self.wakeups.poke())
        else:
            self._apply_turn(turn, self.turns.run(turn))

    def _collect_turn(self, *, wait: bool = False) -> None:
        """Apply the store thread's finished turn (``wait``: wait for it first)."""
        if self._turn is None:
            return
        turn, future = self._turn
        if not wait and not future.done():
            return
        self._turn = None
        self._apply_turn(turn, future.result())

    def _apply_turn(self, turn: Turn, done: TurnResult) -> None:
        """Take a turn's outcome into the pool: drop what was recorded, start what was claimed.

        Claims committed before a failure are started all the same; the failure is raised
        after, for :meth:`_step`'s backoff.
        """
        del self.pending[: done.settled]
        if done.error is None:
            self._round_trips += 1
        if turn.plan is not None and done.error is None:
            took_ms = (time.monotonic() - turn.began) * 1000
            self._turn_ms += (took_ms - self._turn_ms) * 0.2
        idle = [ex for ex in self.executors if ex.idle]
        if turn.version != self._claim_version(idle):
            # Executors were upgraded while the turn ran: its runs say the old code version
            # until they start (see _upgrade).
            self._restamp.update(c.lease_token for _, batch in done.batches for c in batch)
        assigned: list[tuple[Executor, ClaimedJob]] = []
        for queue, batch in done.batches:
            self._assign(queue, batch, idle, assigned, done.since)
        self._dispatch(assigned, done.now)
        if turn.plan is not None:
            self._claim_wanted = self._claim_wanted or done.full or done.error is not None
        if done.error is not None:
            raise done.error

    def _plan(self, idle: list[Executor]) -> ClaimPlan:
        """Queues to claim from, in random order, each with its share, and the room for all.

        A queue's share is what its concurrency leaves free, plus, while prefetching, the
        prefetch limit to wait here; all queues together take no more than the idle executors
        plus the prefetch buffer's free places (``room``), each from what the queues before it
        left.
        """
        prefetching = self._prefetching()
        limit = self._prefetch_limit()
        room = len(idle) + (limit - len(self.buffer) if prefetching else 0)
        shares: list[tuple[str, int]] = []
        queues = list(self.config.queues)
        random.shuffle(queues)
        for queue in queues:
            if queue in self.paused:
                continue
            held = self.running_by_queue[queue] + self.buffer.by_queue[queue]
            share = self.config.queues[queue] + (limit if prefetching else 0) - held
            if share > 0:
                shares.append((queue, share))
        return ClaimPlan(shares=shares, room=room)

    def _prefetching(self) -> bool:
        """Whether to claim ahead of free executors: only while jobs are fast, and only up
        to :meth:`_prefetch_limit` jobs waiting here."""
        return (
            self._prefetch_limit() > len(self.buffer)
            and self._recent_ms < PREFETCH_BELOW_MS
            and not self._stop.is_set()
            and any(ex.ready and not ex.retiring for ex in self.executors)
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
        for job in batch:
            self.leases.track(job.lease_token, since, self.config.lease_for(queue))
            if idle and self.running_by_queue[queue] < self.config.queues[queue]:
                assigned.append((idle.pop(0), job))
                self.running_by_queue[queue] += 1
            else:
                self.buffer.add(job)

    def _from_buffer(self, idle: list[Executor]) -> list[tuple[Executor, ClaimedJob]]:
        """Prefetched jobs for the idle executors, oldest first, within each queue's limit."""
        assigned: list[tuple[Executor, ClaimedJob]] = []
        for claimed in list(self.buffer):
            if not idle:
                break
            queue = claimed.job.queue
            if self.running_by_queue[queue] < self.config.queues[queue]:
                self.buffer.remove(claimed)
                self.running_by_queue[queue] += 1
                self.stats["prefetched"] += 1
                assigned.append((idle.pop(0), claimed))
        return assigned

    def _prefetch_limit(self) -> int:
        return prefetch_limit(
            self.config.executors, self.config.prefetch, self._turn_ms, self._recent_ms
        )

    def _dispatchable(self) -> bool:
        """Whether a prefetched job may start now (its queue is under its concurrency)."""
        return self.buffer.dispatchable(self.running_by_queue, self.config.queues)

    def _claim_version(self, idle: list[Executor]) -> str | None:
        """The code version claimed jobs will run under: the newest generation's."""
        ready = [ex for ex in self.executors if ex.ready and not ex.retiring] or idle
        return max(ready, key=lambda ex: ex.generation).version if ready else None

    def _claim_workers(self, idle: list[Executor]) -> list[str]:
        """The workers of the code claimed jobs will run under (the newest generation's); none
        before an executor has loaded it."""
        ready = [ex for ex in self.executors if ex.ready and not ex.retiring] or idle
        if not ready:
            return []
        newest = max(ex.generation for ex in ready)
        return sorted({w for ex in ready if ex.generation == newest for w in ex.infos})

    def _dispatch(self, assigned: list[tuple[Executor, ClaimedJob]], now: datetime) -> None:
        mono = time.monotonic()
        log_starts = starts_logged()
        for ex, claimed in assigned:
            ex.started_monotonic = mono
            ex.deadline = mono + self._max_execution(ex, claimed).total_seconds()
            if claimed.lease_token in self._restamp:
                self._restamp.discard(claimed.lease_token)
                restamp_run(self.db, claimed.lease_token, ex.version)
            if log_starts:
                log_start(claimed, now)
            ex.dispatch(claimed)

    # -- the loop ---------------------------------------------------------------------------

    def _beat(self) -> None:
        busy = sum(1 for ex in self.executors if ex.running is not None)
        now = utcnow()
        beat = NodeBeat(
            name=self.node,
            host=self.host,
            pid=os.getpid(),
            queues=dict(self.config.queues),
            code_version=self.version,
            executors_busy=busy,
            executors_total=len(self.executors),
            started_at=self.started_at,
            workers=self._claim_workers([]) if any(ex.ready for ex in self.executors) else None,
            schedule=self._schedule.document(now),
        )
        paused = heartbeat(self.db, beat, now)
        self._round_trips += 1
        if paused != self.paused:
            self.paused = paused
            self._claim_wanted = True

    def _handle_events(self) -> None:
        for event in self.wakeups.take():
            if event == "reload":
                self._upgrade()
            elif event.startswith("cancel:"):
                self.leases.check_soon()
            elif event.startswith("audit:"):
                continue  # an operator action, for dashboards; cancels also send cancel:
            elif event != "stop":
                self._claim_wanted = True

    def _fence(self) -> None:
        """Stop jobs whose lease may have expired unrenewed (see ``LeaseKeeper.overdue``)."""
        overdue = self.leases.overdue(time.monotonic())
        if overdue:
            log.warning(
                "leases not renewed in time, stopping their jobs so no other node runs them "
                "at the same time",
                extra={"count": len(overdue)},
            )
            self._stop_lost(overdue)

    def _timers(self) -> None:
        self._fence()
        mono = time.monotonic()
        if mono >= self._next_beat:
            self._beat()
            self._next_beat = mono + 1.0
        if mono >= self._next_poll:
            self._claim_wanted = True
            self._next_poll = mono + self.config.poll_interval * random.uniform(0.8, 1.2)
        lost = self.leases.maintain(mono)
        if lost:
            self._stop_lost(lost)
        self._check_deadlines(mono)

    def _wait(self) -> None:
        mono = time.monotonic()
        deadlines = [ex.deadline for ex in self.executors if ex.deadline is not None]
        until = min([self._next_poll, self._next_beat, self.leases.next_due, *deadlines])
        timeout = (
            0.0
            if ((self._claim_wanted and self._turn is None) or self._dispatchable())
            and any(ex.idle for ex in self.executors)
            else max(0.0, until - mono)
        )
        for key, _ in self._selector.select(min(timeout, 1.0)):
            ex = key.data
            if ex is not None and ex in self.executors:  # not retired by an earlier message
                self._receive(ex)

    def _step(self) -> None:
        """Events, timers, then record and claim; database trouble backs off and retries.

        Unrecorded outcomes stay pending across a failure, so nothing is lost while the
        database is away; leases may expire meanwhile, and the fencing then drops them. An
        outage is logged once when it begins and once when a round trip proves it over (see
        :class:`~kickside_engine.store.reconnect.Outage`), not once per retry.
        """
        round_trips = self._round_trips
        try:
            self._handle_events()
            self._timers()
            self._flush_and_claim()
        except (KicksideError, DBAPIError) as exc:
            wait = self._outage.failed(exc)
            if self._outage.down and self._turn is None:
                # Kept from turn to turn, it would meet the database's return already dead.
                self.turns.close_connection()
            self._next_beat = 0.0  # the retry starts with a heartbeat: one cheap round trip
            self._fence()
            # Wake in time to stop a job whose lease runs out while the database is away (the
            # lease checks and renewals, which need the database, stay due until it is back).
            fence_in = self.leases.fence_due - time.monotonic()
            self._stop.wait(max(0.0, min(wait, fence_in)))
            return
        if self._round_trips != round_trips:
            self._outage.succeeded()

    def prepare(self) -> None:
        """Check what the pool needs before it starts anything, and register its node.

        Raises :class:`MigrationError` for a schema that is not at this Kickside's head,
        :class:`ConfigurationError` for a thread pool whose app does not load, and
        :class:`PermissionDeniedError` (saying what to grant) for a database role or file that
        may not write; the pool is then unusable and nothing is left behind. :meth:`run` and
        :meth:`start` call it first when it was not called; called alone, the node stays
        registered (stale within a minute) until the pool runs.
        """
        if self._prepared:
            return
        try:
            self.db.require_current_schema()
            if self.config.mode == "thread" and self.config.registry is None:
                from kickside_engine.runtime.app import load_registry

                load_registry(self.config.app or "")
            try:
                self._beat()  # registers the node: the pool's first write
            except PermissionDeniedError as exc:
                raise worker_permission_error(self.db, exc) from None
        except BaseException as exc:
            self.error = exc
            self._close_pipes()
            raise
        self._prepared = True

    def run(self) -> None:
        """Run until :meth:`request_stop` (or SIGTERM/SIGINT in the main thread).

        Raises what :meth:`prepare` raises before anything starts. A pool that stops itself on
        an error (executors that cannot load the app) stops gracefully, then raises that error
        (:attr:`failure`); an unexpected error is raised at once, its jobs left to the Lifeline.
        """
        self.prepare()
        previous = route_signals(stop=self.request_stop, upgrade=self.request_upgrade)
        signal_ = local_signal(self.db)
        signal_.subscribe(self.wakeups.on_local_wake)
        # Other processes' changes on PostgreSQL (this process's arrive through the signal).
        subscription: Subscription | None = None
        plugins = PluginThread(self.db, self.config) if self.config.run_plugins else None
        try:
            for _ in range(self.config.executors):
                self._spawn()
            if self.db.is_postgresql:
                subscription = listen(self.db, self.wakeups.on_payload)
            if plugins:
                plugins.start()
            self._store = ThreadPoolExecutor(1, thread_name_prefix=f"kickside-store-{self.node}")
            self.ready.set()
            while not self._stop.is_set():
                self._wait()
                self._step()
            self._drain()
        except BaseException as exc:
            self.error = exc
            log.exception("pool stopped by an unexpected error; its jobs go to the Lifeline now")
            self._abandon()
            raise
        finally:
            if self._store is not None:
                self._store.shutdown(wait=True)  # a turn in flight finishes its statement
            self.turns.close_connection()
            signal_.unsubscribe(self.wakeups.on_local_wake)
            if subscription is not None:
                subscription.stop()
            if plugins:
                plugins.stop()
            for ex in list(self.executors):
                self._retire(ex, kill=ex.running is not None)
            with contextlib.suppress(Exception):
                deregister(self.db, self.node)
            restore_signals(previous)
            self._close_pipes()
            log.info("pool stopped", extra={"node": self.node})
        if self.failure is not None:
            self.error = self.failure
            raise self.failure

    def _close_pipes(self) -> None:
        self._selector.close()
        self.wakeups.close()

    def _drain(self) -> None:
        """Shutdown: stop claiming, wait up to the grace for running jobs, leave the rest."""
        deadline = time.monotonic() + self.config.shutdown_grace.total_seconds()
        while (
            self.buffer or self._turn is not None or any(ex.running for ex in self.executors)
        ) and (time.monotonic() < deadline):
            self._wait()
            self._step()
        with contextlib.suppress(KicksideError, DBAPIError):
            self._collect_turn(wait=True)  # what it claimed is left to the Lifeline below
        abandoned = self._held_leases()
        self._kill_running()
        with contextlib.suppress(KicksideError, DBAPIError):
            self._flush_and_claim()
        if abandoned:
            # Left to the Lifeline, which may rescue them at once rather than at lease expiry.
            with contextlib.suppress(KicksideError, DBAPIError):
                self.leases.expire_now(abandoned)
            log.warning("shutdown left jobs to the Lifeline", extra={"count": len(abandoned)})

    def _held_leases(self) -> list[uuid.UUID]:
        """The lease tokens of every job held here, running or prefetched."""
        held = [ex.running.lease_token for ex in self.executors if ex.running is not None]
        return held + self.buffer.tokens()

    def _kill_running(self) -> None:
        for ex in list(self.executors):
            if ex.running is not None:
                self._retire(ex, kill=True)

    def _abandon(self) -> None:
        """After an unexpected error: stop every execution and end the leases this pool holds,
        so that the Lifeline (of any pool) rescues the jobs now rather than at lease expiry."""
        held = self._held_leases()
        with contextlib.suppress(Exception):
            self._kill_running()
        if held:
            with contextlib.suppress(Exception):
                self.leases.expire_now(held)

    def start(self) -> None:
        """Run the pool on a background thread (embedding); returns once it is ready.

        Raises what :meth:`prepare` raises, here in the caller's thread, and
        :class:`PoolFailedError` when the pool stops before it is ready.
        """
        self.prepare()
        self._thread = threading.Thread(
            target=self._run_on_thread, name=f"kickside-pool-{self.node}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 60
        while not self.ready.wait(0.05) and time.monotonic() < deadline:
            if not self._thread.is_alive():
                raise PoolFailedError(f"the pool could not start: {self.error}") from self.error

    def _run_on_thread(self) -> None:
        with contextlib.suppress(BaseException):  # logged, kept in self.error, raised by stop()
            self.run()

    def stop(self, timeout: float | None = None) -> None:
        """Stop a pool started with :meth:`start` and wait for it.

        Raises :class:`PoolFailedError` if the pool had already stopped on an error (see
        :attr:`error`): an embedding application learns its pool is gone.
        """
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.error is not None:
            raise PoolFailedError(f"the pool stopped on an error: {self.error!r}") from (self.error)
