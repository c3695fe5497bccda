"""The pool supervisor: claims due jobs, hands them to executors, keeps their leases alive,
records outcomes, and upgrades executors in place.

One supervisor thread does all of this in a loop, waiting on executor pipes, a self-pipe (local
inserts, PostgreSQL notifications, signals) and timers. Outcomes that arrive together are
recorded in one transaction together with the next claim (a *turn*), so throughput is not bound
to one commit per job; an outcome not yet recorded when the pool dies means a re-run, never a
loss. While executors are busy a turn runs on a store thread of its own, one at a time, so the
loop goes on taking results and starting prefetched jobs during the round trip.

The loop is here. The work is done by the parts the pool owns, each in a module of its own:
the executor set (executors and the jobs on them), the producer (turns, claims, the prefetch
buffer), the wake-ups, and the lease keeper.
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
from collections import Counter, deque

from sqlalchemy.exc import DBAPIError

from kickside_engine.api import node_name
from kickside_engine.clock import utcnow
from kickside_engine.errors import KicksideError, PermissionDeniedError, PoolFailedError
from kickside_engine.models import ClaimedJob
from kickside_engine.plugins.cron import SchedulePublication
from kickside_engine.runtime.app import SupervisorApp
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.runtime.executor_set import ExecutorSet
from kickside_engine.runtime.executors import Executor, refuse_while_bootstrapping
from kickside_engine.runtime.producer import Producer
from kickside_engine.runtime.supervision import LeaseKeeper, PluginThread
from kickside_engine.runtime.wakeups import Wakeups, restore_signals, route_signals
from kickside_engine.store.database import Database
from kickside_engine.store.grants import worker_permission_error
from kickside_engine.store.listen import Subscription, listen
from kickside_engine.store.nodes import NodeBeat, deregister, heartbeat
from kickside_engine.store.notify import local_signal, wake_folder_of
from kickside_engine.store.reconnect import Outage
from kickside_engine.store.settle import Settlement
from kickside_engine.store.wake_sockets import WakeSocket

__all__ = ["PoolConfig", "PoolFailedError", "WorkerPool"]  # importable from here, as before

log = logging.getLogger("kickside.pool")


class WorkerPool:
    """A supervised worker pool. ``run()`` blocks; ``start()``/``stop()`` run it on a thread."""

    def __init__(self, db: Database, config: PoolConfig) -> None:
        refuse_while_bootstrapping()  # an unguarded main module, imported again by an executor
        self.db = db
        self.config = config
        self.node = config.node or node_name()
        self.host = socket.gethostname()
        self.started_at = utcnow()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.wakeups = Wakeups()
        #: Executor pipes (data: the executor) and the self-pipe (data: None), registered
        #: once: building a selector per wait cost more than the rest of the wait.
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.wakeups.fileno(), selectors.EVENT_READ, None)
        #: Whether the last select found the self-pipe readable.
        self._poked = False
        self._next_poll = 0.0
        self._next_beat = 0.0
        #: Database trouble: backoff, and one log line when it goes and one when it is back.
        self._outage = Outage(log)
        #: Heartbeats that succeeded; with the producer's turns, the round trips that prove
        #: the database is there (a step that only handed work to the store thread does not).
        self._round_trips = 0
        self.leases = LeaseKeeper(db, self.node, config.lease)
        #: The cron entries this node runs, published on every heartbeat (none without plugins).
        self._schedule = SchedulePublication(config.schedule if config.run_plugins else ())
        self.stats: Counter[str] = Counter()
        #: The app as the supervisor sees it, imported once: its hooks and executor counts.
        self.app = SupervisorApp.load(config.registry, config.app)
        #: The app's pool-side hooks (a copy of its own: the pool may add to them).
        self.hooks = self.app.hooks()
        self.executor_set = ExecutorSet(
            db,
            config,
            selector=self._selector,
            leases=self.leases,
            stats=self.stats,
            stopping=self._stop,
            on_free=self._want_claim,
            on_failed=self._executors_failed,
            app=self.app,
            hooks=self.hooks,
        )
        self.producer = Producer(
            db,
            config,
            self.node,
            executors=self.executor_set,
            leases=self.leases,
            stats=self.stats,
            stopping=self._stop,
            wake=self.wakeups.poke,
        )
        self.ready = threading.Event()
        #: The error that ended :meth:`run` (a bug, or what stopped the pool, such as an app
        #: that executors could not load), if one did; :meth:`stop` raises it for a pool run on
        #: a thread.
        self.error: BaseException | None = None
        #: Why the pool stopped itself (it then stops gracefully, and :meth:`run` raises this).
        self.failure: KicksideError | None = None
        self._prepared = False

    @property
    def executors(self) -> list[Executor]:
        """The executors, running or idle (see :class:`ExecutorSet`)."""
        return self.executor_set.executors

    @property
    def version(self) -> str:
        """The code version the pool runs (what a thread pool's new executors load)."""
        return self.executor_set.version

    @version.setter
    def version(self, version: str) -> None:
        self.executor_set.version = version

    @property
    def buffer(self) -> deque[ClaimedJob]:
        """Claimed jobs waiting for an executor (the producer's prefetch buffer)."""
        return self.producer.buffer.jobs

    @property
    def pending(self) -> list[Settlement]:
        """Outcomes taken from executors and not yet recorded."""
        return self.executor_set.pending

    # -- wake-ups and what the parts report -------------------------------------------------

    def request_stop(self) -> None:
        """Ask the pool to shut down gracefully (what SIGTERM and SIGINT do)."""
        self._stop.set()
        self.wakeups.poke("stop")

    def request_upgrade(self) -> None:
        """Replace executors with ones on the current code (what SIGHUP does)."""
        self.wakeups.poke("reload")

    def _want_claim(self) -> None:
        self.producer.claim_wanted = True

    def _executors_failed(self, error: KicksideError) -> None:
        """Executors cannot load the app: stop gracefully, then raise ``error`` from run."""
        if self.failure is None:
            self.failure = error
        self.request_stop()

    def _handle_events(self) -> None:
        readable, self._poked = self._poked, False
        for event in self.wakeups.take(readable):
            if event == "reload":
                self.executor_set.upgrade(waiting=self.producer.buffer)
            elif event.startswith("cancel:"):
                self.leases.check_soon()
            elif event.startswith("audit:"):
                continue  # an operator action, for dashboards; cancels also send cancel:
            elif event != "stop":
                self.producer.claim_wanted = True

    def _stop_lost(self, lost: set[uuid.UUID]) -> None:
        """Stop the executions and forget the prefetched jobs whose lease is gone."""
        self.executor_set.stop_lost(lost)
        self.producer.drop_lost(lost)

    # -- the loop ---------------------------------------------------------------------------

    def _beat(self) -> None:
        executors = self.executor_set
        now = utcnow()
        beat = NodeBeat(
            name=self.node,
            host=self.host,
            pid=os.getpid(),
            queues=dict(self.config.queues),
            code_version=executors.version,
            executors_busy=executors.busy(),
            executors_total=len(executors.executors),
            started_at=self.started_at,
            workers=executors.claim_workers([]) if executors.any_ready() else None,
            schedule=self._schedule.document(now),
            executors=executors.by_kind(),
        )
        paused = heartbeat(self.db, beat, now)
        self._round_trips += 1
        self.producer.set_paused(paused)

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
            self.producer.claim_wanted = True
            self._next_poll = mono + self.config.poll_interval * random.uniform(0.8, 1.2)
        lost = self.leases.maintain(mono)
        if lost:
            self._stop_lost(lost)
        self.executor_set.progress.write_due(self.db, self.node, mono)
        self.executor_set.check_deadlines(mono)

    def _wait(self) -> None:
        mono = time.monotonic()
        executors = self.executor_set
        dues = [self._next_poll, self._next_beat, self.leases.next_due, executors.progress.next_due]
        until = min(*dues, executors.next_deadline)
        timeout = 0.0 if self.producer.urgent() and executors.any_idle() else max(0.0, until - mono)
        for key, _ in self._selector.select(min(timeout, 1.0)):
            ex = key.data
            if isinstance(ex, WakeSocket):
                # Another process committed on this SQLite file: work to claim, a cancel (check
                # the leases now), a reload. A datagram never stops a pool, and what it says
                # is checked against the database (a cancel) or harmless (a claim, a reload).
                for payload in ex.receive():
                    self.wakeups.events.append("nudge" if payload == "stop" else payload)
            elif ex is None:
                self._poked = True  # the self-pipe: read it before the events (_handle_events)
            elif ex in executors.executors:  # not retired by an earlier one
                executors.receive(ex)

    def _step(self) -> None:
        """Events, timers, then record and claim; database trouble backs off and retries.

        Unrecorded outcomes stay pending across a failure, so nothing is lost while the
        database is away; leases may expire meanwhile, and the fencing then drops them. An
        outage is logged once when it begins and once when a round trip proves it over (see
        :class:`~kickside_engine.store.reconnect.Outage`), not once per retry.
        """
        round_trips = self._round_trips + self.producer.round_trips
        try:
            self._handle_events()
            self._timers()
            self.producer.flush_and_claim()
        except (KicksideError, DBAPIError) as exc:
            wait = self._outage.failed(exc)
            if self._outage.down:
                self.producer.release_connection()
            self._next_beat = 0.0  # the retry starts with a heartbeat: one cheap round trip
            self._fence()
            # Wake in time to stop a job whose lease runs out while the database is away (the
            # lease checks and renewals, which need the database, stay due until it is back).
            fence_in = self.leases.fence_due - time.monotonic()
            self._stop.wait(max(0.0, min(wait, fence_in)))
            return
        if self._round_trips + self.producer.round_trips != round_trips:
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
            if self.config.mode == "thread":
                self.app.require()  # a thread pool runs the app it loaded
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
        # Other processes' changes: NOTIFY on PostgreSQL, a wake socket on a SQLite file (this
        # process's arrive through the signal).
        subscription: Subscription | None = None
        wake_socket: WakeSocket | None = None
        plugins = (
            PluginThread(self.db, self.config, self.hooks) if self.config.run_plugins else None
        )
        try:
            wake_socket = self._open_wake_socket()
            self.executor_set.start()
            if self.db.is_postgresql:
                subscription = listen(self.db, self.wakeups.on_payload)
            if plugins:
                plugins.start()
            self.producer.start()
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
            self.producer.stop()  # a turn in flight finishes its statement
            signal_.unsubscribe(self.wakeups.on_local_wake)
            if subscription is not None:
                subscription.stop()
            if wake_socket is not None:
                self._selector.unregister(wake_socket)
                wake_socket.close()
            if plugins:
                plugins.stop()
            self.executor_set.retire_all()
            with contextlib.suppress(Exception):
                deregister(self.db, self.node)
            restore_signals(previous)
            self._close_pipes()
            log.info("pool stopped", extra={"node": self.node})
        if self.failure is not None:
            self.error = self.failure
            raise self.failure

    def _open_wake_socket(self) -> WakeSocket | None:
        folder = wake_folder_of(self.db)
        wake_socket = WakeSocket.open(folder, "pool") if folder is not None else None
        if wake_socket is not None:
            self._selector.register(wake_socket, selectors.EVENT_READ, wake_socket)
        return wake_socket

    def _close_pipes(self) -> None:
        self._selector.close()
        self.wakeups.close()

    def _drain(self) -> None:
        """Shutdown: stop claiming, wait up to the grace for running jobs, leave the rest."""
        deadline = time.monotonic() + self.config.shutdown_grace.total_seconds()
        while (self.producer.buffer or self.producer.turn_running or self.executor_set.busy()) and (
            time.monotonic() < deadline
        ):
            self._wait()
            self._step()
        with contextlib.suppress(KicksideError, DBAPIError):
            self.producer.collect(wait=True)  # what it claimed is left to the Lifeline below
        abandoned = self._held_leases()
        self.executor_set.kill_running()
        with contextlib.suppress(KicksideError, DBAPIError):
            self.producer.flush_and_claim()
        if abandoned:
            # Left to the Lifeline, which may rescue them at once rather than at lease expiry.
            with contextlib.suppress(KicksideError, DBAPIError):
                self.leases.expire_now(abandoned)
            log.warning("shutdown left jobs to the Lifeline", extra={"count": len(abandoned)})

    def _held_leases(self) -> list[uuid.UUID]:
        """The lease tokens of every job held here, running or prefetched."""
        return self.executor_set.held_leases() + self.producer.buffer.tokens()

    def _abandon(self) -> None:
        """After an unexpected error: stop every execution and end the leases this pool holds,
        so that the Lifeline (of any pool) rescues the jobs now rather than at lease expiry."""
        held = self._held_leases()
        with contextlib.suppress(Exception):
            self.executor_set.kill_running()
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
