"""Executors: where jobs run. A process each by default, so a hung job can really be stopped,
a crash fails only its own attempt, and new code loads without restarting the supervisor.

The supervisor talks to an executor over a duplex pipe:

- supervisor → executor: ``("runs", [encode_claimed(ClaimedJob), ...])``, jobs to run one
  after another (a batch while jobs are fast, see ``PoolConfig.handoff_batch``);
  ``("drop", [lease_token.int, ...])``, jobs of the batch not to start (their lease is gone, or
  new code has come); and ``("stop",)``;
- executor → supervisor: ``("ready", code_version, worker_infos)`` once loaded, then per job
  ``("result", lease_token.int, encode_result(ExecutionResult), ended, skipped)``, and while it
  runs ``("progress", lease_token.int, value)`` at most once a second
  (:mod:`kickside_engine.progress`). ``ended`` is the executor's ``time.monotonic()`` at the
  job's end (the clock is the machine's: the next job of the batch starts then, and its
  deadline runs from there); ``skipped`` lists the dropped jobs of the batch passed over
  before the next one starts.

A job's result is on the pipe before the next job of its batch starts, and the drops that
came meanwhile are read before it: whatever happens to the executor, the supervisor knows that
only the job after the last result (and its skips) may have started. The ones behind it go
back to the supervisor's buffer when the executor dies or is killed, never counted as run.

An async executor (:mod:`kickside_engine.runtime.async_executor`) runs many jobs at once and
speaks the same protocol in batches: ``("runs", [encoded claimed jobs])`` and
``("cancel", lease_token.int)`` in, ``("results", [(lease_token.int, encoded result), ...])``
out.

Jobs and results travel as tuples of plain values (:mod:`kickside_engine.wire`): pickling them
as objects cost the supervisor about 65 µs per job. Messages go through :func:`send` and
:func:`receive`, the C pickler straight onto the pipe: ``Connection.send`` builds a
``ForkingPickler`` (for handles and sockets, which these messages never hold) for every message,
three times the cost of the pickling itself.

An in-process (thread) executor runs the same loop with the registry handed to it, for
embedding and tests; it cannot be killed, so a timed-out job's thread is abandoned.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import multiprocessing
import os
import pickle
import select
import signal
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from kickside_engine.errors import ConfigurationError
from kickside_engine.execution import execute
from kickside_engine.models import ClaimedJob
from kickside_engine.runtime.app import code_version, load_registry, worker_infos
from kickside_engine.runtime.inbox import Inbox
from kickside_engine.wire import decode_claimed, encode_claimed, encode_result
from kickside_engine.workers import WorkerRegistry

log = logging.getLogger("kickside.executor")

#: The name of every executor process starts so; a spawned child has its name before it
#: imports the main module again, which is how it knows it is one.
EXECUTOR_NAME_PREFIX = "kickside-executor-"
#: How an executor exits when the main module it imports again starts a pool (EX_CONFIG): the
#: supervisor reads it and stops with :func:`main_not_guarded` instead of respawning it.
EXIT_MAIN_NOT_GUARDED = 78


def main_not_guarded() -> ConfigurationError:
    """The error of a pool started by the main module as it is imported (no ``__main__`` guard).

    Executors are started with multiprocessing's spawn, which imports the main module again in
    each new process: a pool started at the main module's top level starts again there.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    where = f" ({path})" if path else ""
    return ConfigurationError(
        f"the main module{where} starts a worker pool when it is imported, and every executor "
        "process imports it again; start the pool under "
        '`if __name__ == "__main__":` (see "Safe importing of main module" in the '
        "multiprocessing documentation)"
    )


def refuse_while_bootstrapping() -> None:
    """Refuse to build a pool in a spawned process that is still importing the main module.

    That is the main module's unguarded top level running again in a child (multiprocessing
    sets ``_inheriting`` for exactly that phase). In an executor it exits with
    :data:`EXIT_MAIN_NOT_GUARDED` and no traceback, so the supervisor reports it once; in any
    other spawned process it raises the same :class:`ConfigurationError`.
    """
    process = multiprocessing.current_process()
    if not getattr(process, "_inheriting", False):
        return
    if process.name.startswith(EXECUTOR_NAME_PREFIX):
        raise SystemExit(EXIT_MAIN_NOT_GUARDED)
    raise main_not_guarded()


def send(conn: Connection, message: tuple[Any, ...]) -> None:
    """Send one message (a tuple of picklable values) to the other end of an executor pipe."""
    conn.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))


def receive(conn: Connection) -> Any:
    """The next message :func:`send` sent; ``EOFError`` once the other end has closed."""
    return pickle.loads(conn.recv_bytes())


class _Batch:
    """The executor side: the jobs it was handed, in order, and those dropped from them."""

    def __init__(self) -> None:
        self.jobs: deque[ClaimedJob] = deque()
        self.dropped: set[int] = set()
        self.stopping = False

    def take(self, message: tuple[Any, ...]) -> None:
        """Take a message from the supervisor in."""
        kind = message[0]
        if kind == "runs":
            instants: dict[Any, Any] = {}  # shared by the message's jobs (see wire)
            self.jobs.extend(decode_claimed(encoded, instants) for encoded in message[1])
        elif kind == "drop":
            self.dropped.update(message[1])
        elif kind == "stop":
            self.stopping = True

    def skip_dropped(self) -> list[int]:
        """Pass over the dropped jobs at the front: the lease tokens passed over."""
        skipped: list[int] = []
        while self.jobs and self.jobs[0].lease_token.int in self.dropped:
            token = self.jobs.popleft().lease_token.int
            self.dropped.discard(token)
            skipped.append(token)
        if not self.jobs:
            self.dropped.clear()  # drops of jobs that had run already
        return skipped


def _serve(conn: Connection, registry: WorkerRegistry, version: str) -> None:
    send(conn, ("ready", version, worker_infos(registry)))
    # A worker may report progress from threads of its own: one message at a time on the pipe.
    lock = threading.Lock()
    batch = _Batch()
    try:
        while not batch.stopping:
            if not batch.jobs:
                batch.take(receive(conn))
                continue
            claimed = batch.jobs.popleft()
            token = claimed.lease_token.int
            result = execute(registry, claimed, progress_sender(conn, lock, token))
            ended = time.monotonic()
            skipped: list[int] = []
            if batch.jobs:
                # Before the next job starts: drops that came meanwhile pass it over.
                while _readable(conn):
                    batch.take(receive(conn))
                skipped = batch.skip_dropped()
            with lock:
                send(conn, ("result", token, encode_result(result), ended, skipped))
    except (EOFError, OSError):
        return


def _readable(conn: Connection) -> bool:
    """Whether a message waits on ``conn`` (``Connection.poll`` builds a selector each time)."""
    return bool(select.select([conn.fileno()], [], [], 0)[0])


def progress_sender(conn: Connection, lock: threading.Lock, token: int) -> Callable[[Any], None]:
    """What sends the progress of the job of lease ``token`` to the supervisor (a supervisor
    that has gone away no longer needs it: the job then ends with its lease)."""

    def send_progress(value: Any) -> None:
        with contextlib.suppress(OSError, ValueError), lock:
            send(conn, ("progress", token, value))

    return send_progress


def _die_with_parent(supervisor_pid: int) -> None:
    """Make sure this executor never outlives its supervisor (kill -9, power loss).

    An orphaned executor would go on running its job while the lease expires and another node
    runs it again: the one thing a leased-job engine must never allow. The supervisor's PID
    comes from the supervisor: a supervisor that died while this process started is noticed
    here (the parent is then PID 1 or a subreaper, never the supervisor), where reading the
    parent in this process would take the new parent for the supervisor.
    """
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    # After arming: a supervisor that dies from here on sends SIGKILL; one that died before is
    # seen now.
    if os.getppid() != supervisor_pid:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(0.2)
            if os.getppid() != supervisor_pid:
                os._exit(1)

    threading.Thread(target=watch, name="kickside-parent-watch", daemon=True).start()


def _yield_on_wakeup() -> None:
    """Let the supervisor finish handing out work before a woken executor takes its CPU.

    An executor woken by a job would otherwise preempt the supervisor in the middle of
    dispatching a batch (Linux wakeup preemption), costing a context switch per job. Under
    ``SCHED_BATCH`` a waking process does not preempt; it still gets its fair share of CPU.
    """
    with contextlib.suppress(AttributeError, OSError):
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))


def process_main(conn: Connection, app: str, supervisor_pid: int) -> None:
    """Entry point of an executor process: load the app's workers and serve jobs.

    ``supervisor_pid``: the PID of the supervisor that started it, which it must not outlive.
    """
    registry = prepare_process(conn, app, supervisor_pid)
    if registry is not None:
        _serve(conn, registry, code_version(app))


def prepare_process(conn: Connection, app: str, supervisor_pid: int) -> WorkerRegistry | None:
    """Set up an executor process and load the app's workers (None: it did not load, and the
    supervisor was told why)."""
    _die_with_parent(supervisor_pid)
    # The supervisor handles signals; a Ctrl-C in the terminal must not kill running jobs.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _yield_on_wakeup()
    try:
        return load_registry(app)
    except BaseException as exc:  # SystemExit too: an app that exits on import is not loaded
        with contextlib.suppress(Exception):
            send(conn, ("failed", _load_failure(exc)))
        return None


def _load_failure(exc: BaseException) -> str:
    """One line saying why the app did not load (a ConfigurationError says it already)."""
    text = str(exc).strip().splitlines()
    detail = text[0] if text else ""
    if isinstance(exc, ConfigurationError):
        return detail
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


@dataclass(slots=True)
class RunningJob:
    """A job on an executor, as the supervisor tracks it."""

    claimed: ClaimedJob
    #: When it started (monotonic); None while it waits behind another job of its batch.
    started_monotonic: float | None
    #: When its max execution is reached (monotonic; ``inf`` until it starts).
    deadline: float
    #: Set once the supervisor asked an async executor to cancel it: if the task has not come
    #: back by then, the executor's loop is stuck and the executor is killed.
    cancel_by: float | None = None
    #: Cancelled at its deadline: whatever comes back, the attempt is recorded as a timeout.
    timed_out: bool = False
    #: Its lease is gone: it is no longer counted or recorded, only waited for.
    lost: bool = False


#: The kinds of executor, in the order operators see them.
EXECUTOR_KINDS = ("process", "thread", "async")


class Executor:
    """One executor as the supervisor sees it: a process executor runs one job at a time
    (``slots`` 1), an async executor up to ``slots`` at once."""

    #: Whether it runs ``async def`` jobs on an event loop.
    is_async = False
    #: What operators see it as: ``process``, ``thread`` or ``async``.
    kind = "process"

    def __init__(self, generation: int, slots: int = 1) -> None:
        self.id = uuid.uuid4().hex[:8]
        self.generation = generation
        self.slots = slots
        self.conn: Connection
        self.version: str | None = None
        self.infos: dict[str, Any] = {}
        #: The jobs it runs, by lease token (as an int, the form results carry): on a process
        #: executor, in the order it runs them, the first the one that may have started.
        self.jobs: dict[int, RunningJob] = {}
        #: How many of its jobs each queue has (counted in as they are assigned to it).
        self.held: Counter[str] = Counter()
        self.retiring = False

    @functools.cached_property
    def inbox(self) -> Inbox:
        """The messages it sent, read in bulk (the supervisor's side of :attr:`conn`)."""
        return Inbox(self.conn)

    @property
    def ready(self) -> bool:
        return self.version is not None

    @property
    def free_slots(self) -> int:
        """How many more jobs it may take now."""
        if not self.ready or self.retiring:
            return 0
        return max(0, self.slots - len(self.jobs))

    @property
    def idle(self) -> bool:
        return self.free_slots > 0

    def head(self) -> RunningJob | None:
        """The job that runs (or is about to) on a process executor: the first of its jobs."""
        return next(iter(self.jobs.values()), None)

    def hold(self, queue: str) -> bool:
        """Count a job of ``queue`` in; whether it takes one more of the queue's concurrency
        (a process executor runs its jobs one at a time: only its first of a queue does)."""
        self.held[queue] += 1
        return self.is_async or self.held[queue] == 1

    def release(self, queue: str) -> bool:
        """Count a job of ``queue`` out; whether it gives back one of the queue's concurrency."""
        self.held[queue] -= 1
        return self.is_async or self.held[queue] == 0

    def dispatch(self, jobs: list[ClaimedJob]) -> None:
        """Send it ``jobs`` (a process executor runs them one after another)."""
        instants: dict[Any, Any] = {}  # shared by the message's jobs (see wire)
        send(self.conn, ("runs", [encode_claimed(claimed, instants) for claimed in jobs]))

    def drop(self, tokens: list[int]) -> None:
        """Ask a process executor not to start these jobs of its batch (those it has started
        run on: their results come back as usual)."""
        with contextlib.suppress(OSError, ValueError):
            send(self.conn, ("drop", tokens))

    def cancel(self, token: int) -> None:
        """Ask it to cancel the job of lease ``token`` (async executors only)."""
        with contextlib.suppress(OSError, ValueError):
            send(self.conn, ("cancel", token))

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            send(self.conn, ("stop",))

    def kill(self) -> None:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def join(self, timeout_seconds: float) -> None:
        raise NotImplementedError

    def exit_code(self, timeout_seconds: float) -> int | None:
        """The exit code of an executor that ended (waiting up to ``timeout_seconds``)."""
        return None


class ProcessExecutor(Executor):
    """An executor in its own process."""

    _context = multiprocessing.get_context("spawn")

    def __init__(self, app: str, generation: int) -> None:
        super().__init__(generation)
        self._start(process_main, app)

    def _start(self, target: Callable[..., None], app: str, *extra: Any) -> None:
        parent, child = self._context.Pipe(duplex=True)
        self.conn = parent
        self.process = self._context.Process(
            target=target,
            args=(child, app, os.getpid(), *extra),
            name=f"{EXECUTOR_NAME_PREFIX}{self.id}",
            daemon=True,
        )
        self.process.start()
        child.close()

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError, AttributeError):
            if self.process.pid is not None:
                os.kill(self.process.pid, signal.SIGKILL)
        self.process.join(5)
        with contextlib.suppress(OSError):
            self.conn.close()

    def alive(self) -> bool:
        return self.process.is_alive()

    def exit_code(self, timeout_seconds: float) -> int | None:
        self.process.join(timeout_seconds)
        return self.process.exitcode

    def join(self, timeout_seconds: float) -> None:
        self.process.join(timeout_seconds)
        if self.process.is_alive():
            self.kill()
        with contextlib.suppress(OSError):
            self.conn.close()


class ThreadExecutor(Executor):
    """An in-process executor: a thread with the registry handed to it."""

    kind = "thread"

    def __init__(
        self, registry: WorkerRegistry, version: str, generation: int, slots: int = 1
    ) -> None:
        super().__init__(generation, slots)
        parent, child = multiprocessing.Pipe(duplex=True)
        self.conn = parent
        self._child = child
        self.thread = threading.Thread(
            target=self._run,
            args=(child, registry, version),
            name=f"kickside-executor-{self.id}",
            daemon=True,
        )
        self.thread.start()

    def _run(self, conn: Connection, registry: WorkerRegistry, version: str) -> None:
        try:
            self._serve(conn, registry, version)
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _serve(self, conn: Connection, registry: WorkerRegistry, version: str) -> None:
        _serve(conn, registry, version)

    @property
    def pid(self) -> int | None:
        return os.getpid()

    def kill(self) -> None:
        # A thread cannot be killed: close our end so its late result goes nowhere.
        with contextlib.suppress(OSError):
            self.conn.close()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def join(self, timeout_seconds: float) -> None:
        self.thread.join(timeout_seconds)
        with contextlib.suppress(OSError):
            self.conn.close()
