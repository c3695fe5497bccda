"""The executor set: the pool's executors from spawn to retirement, and the jobs on them.

It starts claimed jobs on executors, takes their messages (ready, results, load failures),
and stops what must not go on: executions past their deadline, executions whose lease is
lost, executors that died. It replaces executors for a new code generation in place, each
once it has finished the job it started under the old code.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from kickside_engine.backoff import DEFAULT_BACKOFF
from kickside_engine.clock import utcnow
from kickside_engine.errors import ConfigurationError, KicksideError
from kickside_engine.execution import max_execution, timeout_result
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.models import ClaimedJob
from kickside_engine.runtime.app import WorkerInfo, code_version, load_registry
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.runtime.executors import (
    EXIT_MAIN_NOT_GUARDED,
    Executor,
    ProcessExecutor,
    ThreadExecutor,
    main_not_guarded,
    receive,
)
from kickside_engine.runtime.job_log import log_start, log_stop, starts_logged
from kickside_engine.runtime.prefetch import PREFETCH_BELOW_MS
from kickside_engine.runtime.supervision import LeaseKeeper
from kickside_engine.store.claims import restamp_run
from kickside_engine.store.database import Database
from kickside_engine.store.settle import Settlement
from kickside_engine.wire import decode_result

log = logging.getLogger("kickside.pool")


class ExecutorSet:
    """The pool's executors and the jobs running on them.

    The pool owns it and hands it to the producer, which asks which executors are idle and
    what code they run, and starts the jobs it claimed with :meth:`dispatch`; this class never
    calls the producer. What it learns for others it keeps or reports: outcomes wait in
    :attr:`pending` for the producer's next turn, ``on_free`` is called when an executor may
    take a job (one became ready or finished one), and ``on_failed`` when executors cannot load
    the app (the pool then stops).
    """

    def __init__(
        self,
        db: Database,
        config: PoolConfig,
        *,
        selector: selectors.BaseSelector,
        leases: LeaseKeeper,
        stats: Counter[str],
        stopping: threading.Event,
        on_free: Callable[[], None],
        on_failed: Callable[[KicksideError], None],
    ) -> None:
        self.db = db
        self.config = config
        #: The selector the loop waits on: each executor's pipe is registered with it (data:
        #: the executor) while the executor belongs to the set.
        self.selector = selector
        self.leases = leases
        self.stats = stats
        self.stopping = stopping
        self.on_free = on_free
        self.on_failed = on_failed
        self.executors: list[Executor] = []
        #: The code generation new executors load; :meth:`upgrade` starts the next one.
        self.generation = 0
        #: The code version the pool runs: a thread pool's new executors load it; a process
        #: pool learns it from its executors ("pending" until one has loaded the app).
        self.version = config.code_version or (
            code_version(config.app) if config.mode == "thread" else "pending"
        )
        #: Jobs on executors, by queue: the producer counts them in as it assigns them, this
        #: class counts them out as they finish or are stopped.
        self.running_by_queue: Counter[str] = Counter()
        #: Outcomes taken from executors, not yet recorded: a turn records them, and the
        #: producer then removes what it recorded.
        self.pending: list[Settlement] = []
        #: The moving average of execution times, in ms. It starts at the prefetch threshold:
        #: no prefetching before fast executions have been seen.
        self.recent_ms = float(PREFETCH_BELOW_MS)
        #: Lease tokens of claimed jobs whose run says an older code version than the one they
        #: will start under: :meth:`dispatch` records the starting executor's.
        self.restamp: set[uuid.UUID] = set()

    # -- membership -------------------------------------------------------------------------

    def spawn(self) -> Executor:
        """Start an executor of the current generation (a process, or a thread)."""
        if self.config.mode == "process":
            assert self.config.app is not None
            ex: Executor = ProcessExecutor(self.config.app, self.generation)
        else:
            registry = self.config.registry
            if registry is None:
                registry = load_registry(self.config.app or "")
            ex = ThreadExecutor(registry, self.version, self.generation)
        self.executors.append(ex)
        self.selector.register(ex.conn.fileno(), selectors.EVENT_READ, ex)
        return ex

    def retire(self, ex: Executor, *, kill: bool = False) -> None:
        """Take ``ex`` out of the set and stop it: gracefully, or killed (``kill``)."""
        if ex in self.executors:
            self.executors.remove(ex)
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.selector.unregister(ex.conn.fileno())  # before its pipe closes
        if kill:
            ex.kill()
        else:
            ex.stop()
            ex.join(5)

    def replace(self, ex: Executor, *, kill: bool) -> None:
        """Retire ``ex`` and, unless the pool is stopping, spawn one in its place."""
        self.retire(ex, kill=kill)
        if not self.stopping.is_set():
            self.spawn()

    def upgrade(self, waiting: Iterable[ClaimedJob]) -> None:
        """Start the next code generation: idle executors are replaced now, busy ones once
        their job is done. ``waiting``: jobs claimed for the old code that have not started."""
        self.generation += 1
        # Prefetched jobs were claimed for the old code but will start on the new: their runs
        # get the version they really run under when they start.
        self.restamp_on_start(c.lease_token for c in waiting)
        log.info("upgrading executors in place", extra={"generation": self.generation})
        for ex in list(self.executors):
            if ex.running is None:
                self.retire(ex)
                self.spawn()
            else:
                ex.retiring = True  # finishes its job under the code it started with

    def retire_all(self) -> None:
        """At the end of a run: stop every executor, killing those still running a job."""
        for ex in list(self.executors):
            self.retire(ex, kill=ex.running is not None)

    def kill_running(self) -> None:
        """Kill every executor that runs a job (its job is left to the Lifeline)."""
        for ex in list(self.executors):
            if ex.running is not None:
                self.retire(ex, kill=True)

    # -- what the others ask ----------------------------------------------------------------

    def idle(self) -> list[Executor]:
        """The executors that may take a job now."""
        return [ex for ex in self.executors if ex.idle]

    def busy(self) -> int:
        """How many executors run a job."""
        return sum(1 for ex in self.executors if ex.running is not None)

    def any_idle(self) -> bool:
        """Whether some executor may take a job now."""
        return any(ex.idle for ex in self.executors)

    def any_ready(self) -> bool:
        """Whether some executor has loaded the app."""
        return any(ex.ready for ex in self.executors)

    def any_current(self) -> bool:
        """Whether some executor has loaded the app and is not retiring."""
        return any(ex.ready and not ex.retiring for ex in self.executors)

    def deadlines(self) -> list[float]:
        """The monotonic deadlines of the running executions."""
        return [ex.deadline for ex in self.executors if ex.deadline is not None]

    def held_leases(self) -> list[uuid.UUID]:
        """The lease tokens of the running jobs."""
        return [ex.running.lease_token for ex in self.executors if ex.running is not None]

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
        return sorted({w for ex in ready if ex.generation == newest for w in ex.infos})

    # -- jobs -------------------------------------------------------------------------------

    def restamp_on_start(self, tokens: Iterable[uuid.UUID]) -> None:
        """Record, when they start, the code version of these claimed jobs' runs."""
        self.restamp.update(tokens)

    def dispatch(self, assigned: list[tuple[Executor, ClaimedJob]], now: datetime) -> None:
        """Start each job on its executor (``now``: when it was claimed or taken from the
        buffer, for the wait the start line reports)."""
        mono = time.monotonic()
        log_starts = starts_logged()
        for ex, claimed in assigned:
            ex.started_monotonic = mono
            ex.deadline = mono + self._max_execution(ex, claimed).total_seconds()
            if claimed.lease_token in self.restamp:
                self.restamp.discard(claimed.lease_token)
                restamp_run(self.db, claimed.lease_token, ex.version)
            if log_starts:
                log_start(claimed, now)
            ex.dispatch(claimed)

    def receive(self, ex: Executor) -> None:
        """Take the next message from ``ex``, whose pipe is readable."""
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
            self.on_free()
        elif kind == "result":
            if ex.running is not None and message[1] == ex.running.lease_token.int:
                self._finish(ex, decode_result(message[2]))
        elif kind == "failed":
            log.error("executor could not load the app: %s", message[1])
            error = ConfigurationError(
                f"executors could not load the app {self.config.app!r}: {message[1]}"
            )
            self.retire(ex, kill=True)
            self.on_failed(error)

    def _finish(self, ex: Executor, result: ExecutionResult) -> None:
        """Take ``result`` of the job on ``ex``: its outcome waits in :attr:`pending`."""
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
        self.recent_ms += (result.duration_ms - self.recent_ms) * 0.1
        self.on_free()
        log_stop(claimed, result)
        if ex.retiring:
            self.replace(ex, kill=False)

    def _executor_died(self, ex: Executor) -> None:
        """``ex`` is gone: its job (if any) crashed; another executor takes its place.

        An executor that ended before it was ready because the main module started a pool
        again (no ``__main__`` guard) would do so again: the pool stops with that error.
        """
        if not ex.ready and ex.exit_code(5) == EXIT_MAIN_NOT_GUARDED:
            error = main_not_guarded()
            log.error("%s", error)
            self.retire(ex, kill=True)
            self.on_failed(error)
            return
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
        self.replace(ex, kill=True)

    def check_deadlines(self, now_mono: float) -> None:
        """Time out the executions past their deadline; their executors are replaced."""
        for ex in list(self.executors):
            if ex.running is not None and ex.deadline is not None and now_mono >= ex.deadline:
                claimed = ex.running
                limit = self._max_execution(ex, claimed)
                self._finish(ex, timeout_result(limit, ex.started_monotonic))
                self.replace(ex, kill=True)

    def _info(self, ex: Executor, worker: str) -> WorkerInfo | None:
        info = ex.infos.get(worker)
        return info if isinstance(info, WorkerInfo) else None

    def _max_execution(self, ex: Executor, claimed: ClaimedJob) -> timedelta:
        info = self._info(ex, claimed.job.worker)
        timeout = info.timeout if info is not None else None
        return max_execution(claimed.job, timeout, self.config.default_max_execution)

    def stop_lost(self, lost: set[uuid.UUID]) -> None:
        """Stop executions whose lease is gone (cancelled or rescued): never record them.

        An executor whose result already waits in its pipe has finished: that result is taken
        (the fenced settle drops it) rather than the executor killed. After a stop signal the
        wait for results can return empty although one is waiting (epoll is not restarted).
        """
        for ex in list(self.executors):
            while self._lost_job_waiting(ex, lost):
                self.receive(ex)
            if ex in self.executors and ex.running is not None and ex.running.lease_token in lost:
                claimed = ex.running
                log.warning("lease lost, stopping execution", extra={"job_id": str(claimed.job.id)})
                self.running_by_queue[claimed.job.queue] -= 1
                self.leases.forget(claimed.lease_token)
                ex.running = None
                self.replace(ex, kill=True)

    def _lost_job_waiting(self, ex: Executor, lost: set[uuid.UUID]) -> bool:
        """Whether ``ex`` runs a job of ``lost`` and a message from it waits unread."""
        if ex not in self.executors or ex.running is None or ex.running.lease_token not in lost:
            return False
        try:
            return ex.conn.poll(0)
        except (OSError, EOFError):
            return False
