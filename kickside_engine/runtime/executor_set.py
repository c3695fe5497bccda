"""The executor set: the pool's executors from spawn to retirement, and the jobs on them.

It starts claimed jobs on executors, takes their messages (ready, results, load failures),
and stops what must not go on: executions past their deadline, executions whose lease is
lost, executors that died. It replaces executors for a new code generation in place, each
once it has finished the job it started under the old code.

Process executors run one sync job at a time, handed over in batches while jobs are fast
(:meth:`batch_size`: the first job of a batch starts, the others wait their turn there); async
executors (``PoolConfig.async_executors``) run up to ``async_slots`` ``async def`` jobs each.
An idle process executor counts as one idle place per job of a batch, an async executor as one
per free slot, and a job goes only to an executor of its worker's kind (:meth:`take_place`).
At its deadline a process executor's job is stopped by killing the process, the jobs of its
batch behind it handed back (:attr:`returned`); an async job's task is cancelled, and the
executor killed only if its loop does not come back within :data:`CANCEL_GRACE_SECONDS`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import selectors
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from kickside_engine.backoff import DEFAULT_BACKOFF
from kickside_engine.clock import utcnow
from kickside_engine.errors import ConfigurationError, KicksideError
from kickside_engine.execution import max_execution, timeout_result
from kickside_engine.hooks import Hooks, fire, fire_stop
from kickside_engine.lifecycle import ExecutionResult, ResultKind, settlement_for
from kickside_engine.models import ClaimedJob, JobState
from kickside_engine.runtime.app import SupervisorApp, WorkerInfo, code_version
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.runtime.executor_kinds import (
    crowded,
    executors_to_add,
    new_executor,
    starting_counts,
    usable_cpus,
)
from kickside_engine.runtime.executors import (
    EXIT_MAIN_NOT_GUARDED,
    Executor,
    RunningJob,
    main_not_guarded,
)
from kickside_engine.runtime.job_log import log_blocked_loop, log_start, log_stop, starts_logged
from kickside_engine.runtime.placement import Placement
from kickside_engine.runtime.prefetch import BATCH_BELOW_MS, HANDOFF_BATCH, PREFETCH_BELOW_MS
from kickside_engine.runtime.progress_buffer import ProgressBuffer
from kickside_engine.runtime.supervision import LeaseKeeper
from kickside_engine.store.claims import restamp_run
from kickside_engine.store.database import Database
from kickside_engine.store.settle import Settlement
from kickside_engine.wire import decode_result

log = logging.getLogger("kickside.pool")

#: How long an async executor has to bring back a task it was told to cancel before it is
#: killed (its loop is blocked, or the job ignores cancellation).
CANCEL_GRACE_SECONDS = 5.0


class ExecutorSet(Placement):
    """The pool's executors and the jobs running on them.

    The pool owns it and hands it to the producer, which asks which executors are idle and
    what code they run, and starts the jobs it claimed with :meth:`dispatch`; this class never
    calls the producer. What it learns for others it keeps or reports: outcomes wait in
    :attr:`pending` for the producer's next turn, ``on_free`` is called when an executor may
    take a job (one became ready or finished one), and ``on_failed`` when executors cannot load
    the app (the pool then stops). What the others ask (free places, which executor takes
    which job, the claim's workers) is answered by :class:`Placement`.
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
        app: SupervisorApp,
        hooks: Hooks | None = None,
    ) -> None:
        super().__init__()
        self.db = db
        self.config = config
        #: The app as the supervisor loaded it: what sizes the executors, and a thread pool's
        #: registry.
        self.app = app
        #: The app's ``on_start``, ``on_stop`` and ``on_discard`` hooks.
        self.hooks = hooks or Hooks()
        #: The selector the loop waits on: each executor's pipe is registered with it (data:
        #: the executor) while the executor belongs to the set.
        self.selector = selector
        self.leases = leases
        self.stats = stats
        self.stopping = stopping
        self.on_free = on_free
        self.on_failed = on_failed
        #: The code generation new executors load; :meth:`upgrade` starts the next one.
        self.generation = 0
        #: The code version the pool runs: a thread pool's new executors load it; a process
        #: pool learns it from its executors ("pending" until one has loaded the app).
        self.version = config.code_version or (
            code_version(config.app) if config.mode == "thread" else "pending"
        )
        #: Outcomes taken from executors, not yet recorded: a turn records them, and the
        #: producer then removes what it recorded.
        self.pending: list[Settlement] = []
        #: Running jobs' progress, written by the pool once per tick.
        self.progress = ProgressBuffer()
        #: The moving average of execution times, in ms. It starts at the prefetch threshold:
        #: no prefetching before fast executions have been seen.
        self.recent_ms = float(PREFETCH_BELOW_MS)
        #: Lease tokens of claimed jobs whose run says an older code version than the one they
        #: will start under: :meth:`dispatch` records the starting executor's.
        self.restamp: set[uuid.UUID] = set()

    # -- membership -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the pool's executors, the process executors, then the async ones, as many
        as :func:`~kickside_engine.runtime.executor_kinds.starting_counts` says for the app's
        workers."""
        processes, count = starting_counts(self.config, self.app.worker_kinds())
        if self.config.mode == "process" and crowded(processes, cpus := usable_cpus()):
            log.warning(
                "more process executors than this machine runs well: each is a Python process "
                "running one sync job at a time; async def workers run many jobs in one "
                "process, and --process-executors (PoolConfig(process_executors=N)) sets the "
                "count",
                extra={"process_executors": processes, "cpus": cpus},
            )
        for _ in range(processes):
            self.spawn()
        for _ in range(count):
            self.spawn(is_async=True)

    def spawn(self, *, is_async: bool = False) -> Executor:
        """Start an executor of the current generation (a process, or a thread)."""
        ex = new_executor(self.config, self.app, self.version, self.generation, is_async=is_async)
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
            self.spawn(is_async=ex.is_async)

    def upgrade(self, waiting: Iterable[ClaimedJob]) -> None:
        """Start the next code generation: idle executors are replaced now, busy ones once
        their job is done. ``waiting``: jobs claimed for the old code that have not started."""
        self.generation += 1
        # Prefetched jobs were claimed for the old code but will start on the new: their runs
        # get the version they really run under when they start.
        self.restamp_on_start(c.lease_token for c in waiting)
        log.info("upgrading executors in place", extra={"generation": self.generation})
        for ex in list(self.executors):
            if not ex.jobs:
                self.retire(ex)
                self.spawn(is_async=ex.is_async)
            else:
                ex.retiring = True  # finishes its jobs under the code they started with
                if ex.is_async:
                    # Its tasks may run long: the new code takes new jobs meanwhile.
                    self.spawn(is_async=True)
                else:
                    # Its batch's jobs that have not started run on the new code.
                    waiting_here = [
                        t for t, job in ex.jobs.items() if job.started_monotonic is None
                    ]
                    if waiting_here:
                        ex.drop(waiting_here)

    def retire_all(self) -> None:
        """At the end of a run: stop every executor, killing those still running a job."""
        for ex in list(self.executors):
            self.retire(ex, kill=bool(ex.jobs))

    def kill_running(self) -> None:
        """Kill every executor that runs a job (its jobs are left to the Lifeline)."""
        for ex in list(self.executors):
            if ex.jobs:
                self.retire(ex, kill=True)

    # -- jobs -------------------------------------------------------------------------------

    def batch_size(self) -> int:
        """How many jobs an idle process executor may be handed at once: ``handoff_batch``,
        else :data:`HANDOFF_BATCH` while executions average under :data:`BATCH_BELOW_MS` (and
        prefetching is on), else one."""
        if self.config.handoff_batch is not None:
            return self.config.handoff_batch
        if self.config.prefetch == 0 or self.recent_ms >= BATCH_BELOW_MS:
            return 1
        return HANDOFF_BATCH

    def restamp_on_start(self, tokens: Iterable[uuid.UUID]) -> None:
        """Record, when they start, the code version of these claimed jobs' runs."""
        self.restamp.update(tokens)

    def dispatch(self, assigned: list[tuple[Executor, ClaimedJob]], now: datetime) -> None:
        """Start each job on its executor (``now``: when it was claimed or taken from the
        buffer, for the wait the start line reports); on a process executor already given a
        job, it waits its turn there."""
        mono = time.monotonic()
        log_starts = starts_logged()
        batches: dict[Executor, list[ClaimedJob]] = {}
        for ex, claimed in assigned:
            if ex.is_async or not ex.jobs:
                deadline = mono + self._max_execution(ex, claimed).total_seconds()
                ex.jobs[claimed.lease_token.int] = RunningJob(claimed, mono, deadline)
                self.next_deadline = min(self.next_deadline, deadline)
                self._started(claimed, now, log_starts)
            else:  # behind another job of its batch: its deadline runs once it starts
                ex.jobs[claimed.lease_token.int] = RunningJob(claimed, None, math.inf)
                self.stats["queued_on_executor"] += 1
            if claimed.lease_token in self.restamp:
                self.restamp.discard(claimed.lease_token)
                restamp_run(self.db, claimed.lease_token, ex.version)
            batches.setdefault(ex, []).append(claimed)
        for ex, jobs in batches.items():
            ex.dispatch(jobs)  # an async executor takes its jobs in one message

    def _started(self, claimed: ClaimedJob, now: datetime, log_starts: bool) -> None:
        """A job starts: its ``job.start`` line and the app's ``on_start`` hook."""
        if log_starts:
            log_start(claimed, now)
        if self.hooks.on_start:
            fire(self.hooks.on_start, claimed.job)

    def receive(self, ex: Executor) -> None:
        """Take the messages waiting from ``ex``, whose pipe is readable."""
        try:
            messages = ex.inbox.read()
        except (EOFError, OSError):
            self._executor_died(ex)
            return
        for message in messages:
            if ex not in self.executors:
                return  # retired by an earlier one
            self._take(ex, message)

    def _take(self, ex: Executor, message: tuple[Any, ...]) -> None:
        """Take one message from ``ex`` in."""
        kind = message[0]
        if kind == "ready":
            ex.version, ex.infos = message[1], message[2]
            if self.config.mode == "process":
                self.version = ex.version or self.version
            self._learn_workers(ex)
            self.on_free()
        elif kind == "progress":
            job = ex.jobs.get(message[1])
            if job is not None and not job.lost:
                self.progress.note(job.claimed.lease_token, message[2])
        elif kind == "result":
            _, token, result, ended, skipped = message
            self._finish(ex, token, decode_result(result), ended=ended, skipped=skipped)
        elif kind == "results":
            for token, result in message[1]:
                if ex in self.executors:  # a result may have retired it (upgrade)
                    self._finish(ex, token, decode_result(result))
        elif kind == "blocked":
            running = ex.jobs.get(message[1])
            if running is not None:
                log_blocked_loop(running.claimed, message[2])
        elif kind == "failed":
            log.error("executor could not load the app: %s", message[1])
            error = ConfigurationError(
                f"executors could not load the app {self.config.app!r}: {message[1]}"
            )
            self.retire(ex, kill=True)
            self.on_failed(error)

    def _learn_workers(self, ex: Executor) -> None:
        """Note ``ex``'s async workers, and start executors of a kind they need that the pool
        lacks (see :func:`~kickside_engine.runtime.executor_kinds.executors_to_add`)."""
        found = {w for w, info in ex.infos.items() if getattr(info, "is_async", False)}
        self.async_workers |= found
        if self.stopping.is_set():
            return
        for is_async in executors_to_add(self.config, self.executors, ex.infos, found):
            self.spawn(is_async=is_async)

    def _finish(
        self,
        ex: Executor,
        token: int,
        result: ExecutionResult,
        *,
        ended: float | None = None,
        skipped: Iterable[int] = (),
    ) -> None:
        """Take ``result`` of the job of lease ``token`` on ``ex``: its outcome waits in
        :attr:`pending` (a timed-out job's as a timeout; a lost job's not at all).

        On a process executor, ``skipped`` (jobs of its batch it passed over) go back to the
        buffer, and the next job of the batch started at ``ended`` (its monotonic time).
        """
        job = ex.jobs.pop(token, None)
        if job is None:
            return
        if not job.lost:
            claimed = job.claimed
            if job.timed_out:
                started = job.started_monotonic or time.monotonic()
                result = timeout_result(self._max_execution(ex, claimed), started)
            result = self.progress.carried_by(claimed.lease_token, result)
            info = self._info(ex, claimed.job.worker)
            backoff = info.backoff_for(claimed.job.is_slot) if info else DEFAULT_BACKOFF
            settlement = settlement_for(claimed, result, backoff=backoff)
            self.pending.append(settlement)
            self.release(ex, claimed.job.queue)
            self.leases.forget(claimed.lease_token)
            self.stats[result.kind.value] += 1
            self.recent_ms += (result.duration_ms - self.recent_ms) * 0.1
            log_stop(claimed, result)
            if self.hooks.on_stop or self.hooks.on_discard:
                discarded = settlement.values.get("state") == JobState.DISCARDED.value
                kind, ms, error = result.kind.value, result.duration_ms, settlement.run_error
                fire_stop(self.hooks, claimed.job, kind, ms, error, discarded=discarded)
        for passed in skipped:
            self._take_back(ex, passed)
        if not ex.is_async:
            self._start_next(ex, time.monotonic() if ended is None else ended)
        self.on_free()
        if ex.retiring and not ex.jobs and ex in self.executors:
            if ex.is_async:
                self.retire(ex)  # replaced when it began retiring
            else:
                self.replace(ex, kill=False)

    def _start_next(self, ex: Executor, at: float) -> None:
        """The next job of ``ex``'s batch started ``at``: its deadline runs from then (a job
        whose lease is gone is due at once, to be stopped by :meth:`check_deadlines`)."""
        head = ex.head()
        if head is None or head.started_monotonic is not None:
            return
        head.started_monotonic = at
        if head.lost:
            head.deadline = at
        else:
            head.deadline = at + self._max_execution(ex, head.claimed).total_seconds()
            self._started(head.claimed, utcnow(), starts_logged())
        self.next_deadline = min(self.next_deadline, head.deadline)

    def _take_back(self, ex: Executor, token: int) -> None:
        """A job of ``ex``'s batch that did not start there goes back to the buffer (unless
        its lease is gone)."""
        job = ex.jobs.pop(token, None)
        if job is None or job.lost:
            return
        claimed = job.claimed
        self.release(ex, claimed.job.queue)
        if ex.generation != self.generation:
            self.restamp.add(claimed.lease_token)  # its run says the old code's version
        self.returned.append(claimed)
        self.stats["handed_back"] += 1

    def _read_waiting(self, ex: Executor) -> None:
        """Take the messages ``ex`` has written and the loop has not read yet."""
        while ex in self.executors and self._unread(ex):
            self.receive(ex)

    @staticmethod
    def _unread(ex: Executor) -> bool:
        """Whether a message from ``ex`` waits unread (not once its pipe is closed)."""
        try:
            return ex.inbox.waiting()
        except (OSError, ValueError):
            return False

    def _executor_died(self, ex: Executor) -> None:
        """``ex`` is gone: its jobs crashed; another executor takes its place.

        An executor that ended before it was ready because the main module started a pool
        again (no ``__main__`` guard) would do so again: the pool stops with that error.
        """
        if not ex.ready and ex.exit_code(5) == EXIT_MAIN_NOT_GUARDED:
            error = main_not_guarded()
            log.error("%s", error)
            self.retire(ex, kill=True)
            self.on_failed(error)
            return
        code = getattr(getattr(ex, "process", None), "exitcode", None)
        kind = "async executor" if ex.is_async else "executor"
        self._fail_all(
            ex, f"crash: the {kind} process running this attempt died (exit code {code})"
        )

    def _fail_all(self, ex: Executor, error: str) -> None:
        """Kill ``ex`` and record the jobs that may have started on it: a timed-out one as a
        timeout, the others with ``error``; the jobs of a process executor's batch behind the
        first go back to the buffer; another executor takes its place."""
        self.retire(ex, kill=True)
        if not ex.is_async:
            for token in list(ex.jobs)[1:]:
                self._take_back(ex, token)
        now = time.monotonic()
        for token, job in list(ex.jobs.items()):
            ms = int((now - (job.started_monotonic or now)) * 1000)
            self._finish(ex, token, ExecutionResult(ResultKind.CRASH, utcnow(), ms, error=error))
        if not self.stopping.is_set() and not (ex.retiring and ex.is_async):
            self.spawn(is_async=ex.is_async)

    def check_deadlines(self, now_mono: float) -> None:
        """Time out the executions past their deadline: a process executor is killed and
        replaced; an async executor is told to cancel the task, and killed and replaced when
        its loop does not bring the task back within :data:`CANCEL_GRACE_SECONDS`."""
        if now_mono < self.next_deadline:
            return
        for ex in list(self.executors):
            if not ex.is_async:
                self._check_first(ex, now_mono)
                continue
            for token, job in list(ex.jobs.items()):
                if job.cancel_by is not None:
                    if now_mono >= job.cancel_by:
                        log.error(
                            "an async executor did not stop a cancelled job in time; killing it",
                            extra={"job_id": str(job.claimed.job.id), "executor": ex.id},
                        )
                        self._fail_all(
                            ex,
                            "crash: the async executor running this attempt was killed: its "
                            f"event loop did not stop a cancelled job within "
                            f"{CANCEL_GRACE_SECONDS:g}s (a job blocking the loop?)",
                        )
                        break
                elif now_mono >= job.deadline:
                    job.timed_out = True
                    job.cancel_by = now_mono + CANCEL_GRACE_SECONDS
                    ex.cancel(token)
        self.next_deadline = self.earliest_deadline()

    def _check_first(self, ex: Executor, now_mono: float) -> None:
        """Stop the running job of process executor ``ex`` if it is past its deadline, or its
        lease is gone, by killing the executor: unless its result waits unread."""
        head = ex.head()
        if head is None or now_mono < head.deadline:
            return
        self._read_waiting(ex)
        if ex not in self.executors or ex.head() is not head:
            return  # it finished: the next job's deadline is checked on the next pass
        if head.lost:
            log.warning(
                "stopping a job whose lease is gone",
                extra={"job_id": str(head.claimed.job.id), "executor": ex.id},
            )
            self._fail_all(ex, "lease lost")  # not recorded: its lease is gone
        else:
            head.timed_out = True  # recorded as a timeout by _fail_all
            self._fail_all(ex, "timeout")

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
        self.progress.drop(lost)
        self.returned[:] = [c for c in self.returned if c.lease_token not in lost]
        for ex in list(self.executors):
            while self._lost_job_waiting(ex, lost):
                self.receive(ex)
            if ex not in self.executors:
                continue
            dropped: list[int] = []
            for token, job in list(ex.jobs.items()):
                claimed = job.claimed
                if job.lost or claimed.lease_token not in lost:
                    continue
                log.warning("lease lost, stopping execution", extra={"job_id": str(claimed.job.id)})
                self.release(ex, claimed.job.queue)
                self.leases.forget(claimed.lease_token)
                # Waited for (an async slot stays taken) but never recorded.
                job.lost = True
                if ex.is_async:
                    job.cancel_by = time.monotonic() + CANCEL_GRACE_SECONDS
                    self.next_deadline = min(self.next_deadline, job.cancel_by)
                    ex.cancel(token)
                elif job.started_monotonic is None:
                    dropped.append(token)  # not started: the executor passes it over
            head = ex.head()
            if not ex.is_async and head is not None and head.lost:
                self._fail_all(ex, "lease lost")  # it runs: killed, the rest handed back
            elif dropped:
                ex.drop(dropped)

    def _lost_job_waiting(self, ex: Executor, lost: set[uuid.UUID]) -> bool:
        """Whether ``ex`` runs a job of ``lost`` and a message from it waits unread."""
        if ex not in self.executors or not any(
            not job.lost and job.claimed.lease_token in lost for job in ex.jobs.values()
        ):
            return False
        return self._unread(ex)
