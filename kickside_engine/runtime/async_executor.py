"""Async executors: an event loop in an executor process running many ``async def`` jobs at once.

The supervisor treats an async executor as an executor with ``slots`` places (``PoolConfig``'s
``async_slots``): it hands it jobs in batches, ``("runs", [encoded claimed jobs])``, and takes
outcomes back in batches, ``("results", [(lease_token.int, encoded result), ...])``, sent once
per turn of the loop with every outcome that turn produced. ``("cancel", lease_token.int)``
cancels one job's task (its timeout, or its lease lost): ``CancelledError`` is raised in the
worker, its ``finally`` blocks run, and the task's end is reported like any other (the
supervisor knows why it cancelled). A loop that does not come back from a cancel is the
supervisor's to kill (see ``ExecutorSet.check_deadlines``). A running job's progress goes out
as from a process executor, ``("progress", lease_token.int, value)``, at most once a second.

A step of a job that holds the loop for long (blocking code in an ``async def`` job) is reported
as ``("blocked", lease_token.int, seconds)`` and logged by the supervisor with the job's worker
(see :mod:`~kickside_engine.runtime.blocking`).

Crash isolation is the process executor's: one process per executor, which dies with the
supervisor and whose death fails only the jobs it held.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from multiprocessing.connection import Connection
from typing import Any

from kickside_engine.clock import utcnow
from kickside_engine.execution import execute_async
from kickside_engine.lifecycle import ExecutionResult, ResultKind
from kickside_engine.models import ClaimedJob
from kickside_engine.runtime.app import code_version, worker_infos
from kickside_engine.runtime.blocking import TimedSteps
from kickside_engine.runtime.executors import (
    ProcessExecutor,
    ThreadExecutor,
    prepare_process,
    progress_sender,
    receive,
    send,
)
from kickside_engine.wire import decode_claimed, encode_result
from kickside_engine.workers import WorkerRegistry


class _Server:
    """The executor side: tasks by lease token, outcomes waiting to be sent."""

    def __init__(self, conn: Connection, registry: WorkerRegistry) -> None:
        self.conn = conn
        self.registry = registry
        self.loop = asyncio.get_running_loop()
        self.tasks: dict[int, asyncio.Task[ExecutionResult]] = {}
        self.outcomes: list[tuple[int, tuple[object, ...]]] = []
        self.flush_scheduled = False
        self.done = asyncio.Event()
        #: Progress may be sent from a worker's own threads: one message at a time.
        self.lock = threading.Lock()

    def readable(self) -> None:
        try:
            message = receive(self.conn)
        except (EOFError, OSError):
            self.done.set()  # the supervisor is gone: nothing can be reported any more
            return
        kind = message[0]
        if kind == "runs":
            instants: dict[Any, Any] = {}  # shared by the message's jobs (see wire)
            for encoded in message[1]:
                self.start(decode_claimed(encoded, instants))
        elif kind == "cancel":
            task = self.tasks.get(message[1])
            if task is not None:
                task.cancel()
        elif kind == "stop":
            self.done.set()

    def start(self, claimed: ClaimedJob) -> None:
        token = claimed.lease_token.int
        progress = progress_sender(self.conn, self.lock, token)
        coro = TimedSteps(
            execute_async(self.registry, claimed, progress), lambda s: self.blocked(token, s)
        )
        task = self.loop.create_task(coro)
        self.tasks[token] = task
        task.add_done_callback(lambda t: self.finished(token, t))

    def blocked(self, token: int, seconds: float) -> None:
        """Tell the supervisor that the job of lease ``token`` held the loop for ``seconds``."""
        with contextlib.suppress(BrokenPipeError, OSError), self.lock:
            send(self.conn, ("blocked", token, seconds))

    def finished(self, token: int, task: asyncio.Task[ExecutionResult]) -> None:
        self.tasks.pop(token, None)
        if task.cancelled():
            result = ExecutionResult(ResultKind.ERROR, utcnow(), 0, error="cancelled")
        elif (exc := task.exception()) is not None:
            result = ExecutionResult(
                ResultKind.CRASH, utcnow(), 0, error=f"{type(exc).__name__}: {exc}"
            )
        else:
            result = task.result()
        self.outcomes.append((token, encode_result(result)))
        if not self.flush_scheduled:
            # Every outcome this turn of the loop produces goes in one message.
            self.flush_scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.flush_scheduled = False
        if not self.outcomes:
            return
        outcomes, self.outcomes = self.outcomes, []
        try:
            with self.lock:
                send(self.conn, ("results", outcomes))
        except (BrokenPipeError, OSError):
            self.done.set()


async def serve_async(conn: Connection, registry: WorkerRegistry, version: str) -> None:
    """Run jobs from ``conn`` on this thread's event loop until told to stop."""
    server = _Server(conn, registry)
    send(conn, ("ready", version, worker_infos(registry)))
    server.loop.add_reader(conn.fileno(), server.readable)
    try:
        await server.done.wait()
    finally:
        with contextlib.suppress(Exception):
            server.loop.remove_reader(conn.fileno())
        for task in list(server.tasks.values()):
            task.cancel()
        if server.tasks:
            await asyncio.wait(list(server.tasks.values()), timeout=1.0)


def async_process_main(conn: Connection, app: str, supervisor_pid: int) -> None:
    """Entry point of an async executor process: load the app, run its event loop."""
    registry = prepare_process(conn, app, supervisor_pid)
    if registry is not None:
        asyncio.run(serve_async(conn, registry, code_version(app)))


class AsyncProcessExecutor(ProcessExecutor):
    """An async executor in its own process."""

    is_async = True
    kind = "async"

    def __init__(self, app: str, generation: int, slots: int) -> None:
        super(ProcessExecutor, self).__init__(generation, slots)
        self._start(async_process_main, app)


class AsyncThreadExecutor(ThreadExecutor):
    """An in-process async executor: an event loop on a thread of the supervisor's process."""

    is_async = True
    kind = "async"

    def _serve(self, conn: Connection, registry: WorkerRegistry, version: str) -> None:
        asyncio.run(serve_async(conn, registry, version))
