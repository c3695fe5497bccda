"""Running a worker pool for a workload: in a process of its own, or in this one.

A separate process is how Kickside is deployed (``kickside worker``): wake-ups then travel
through PostgreSQL NOTIFY, or on SQLite through polling. The in-process pool is the embedded
case, where an insert wakes the pool directly.

Starting ten executor processes takes seconds on a busy two-core machine, so the runner keeps
one pool process per backend (:class:`SharedPool`) for every workload that needs one.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from bench.cpu import process_tree_cpu_seconds
from bench.targets import Target
from bench.workloads.poolhost import APP, READY_TIMEOUT_S, wait_ready
from kickside_engine import Database
from kickside_engine.runtime import PoolConfig, WorkerPool

ROOT = Path(__file__).resolve().parents[2]
CONCURRENCY = 10


class PoolProcess:
    """A pool host process (:mod:`bench.workloads.poolhost`), ready when entered."""

    def __init__(
        self,
        target: Target,
        *,
        concurrency: int = CONCURRENCY,
        log: Path | None = None,
        app: str = APP,
        async_slots: int | None = None,
    ) -> None:
        self.target = target
        self.concurrency = concurrency
        self.log = log
        self.app = app
        #: One async executor with this many slots (and no process executor), when given.
        self.async_slots = async_slots
        self.proc: subprocess.Popen[str] | None = None
        self.summary: dict[str, Any] = {}

    def __enter__(self) -> PoolProcess:
        pythonpath = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath)}
        stderr: IO[str] | int = subprocess.DEVNULL
        if self.log is not None:
            stderr = open(self.log, "a")  # handed to the child, closed below
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.workloads.poolhost",
                    *self.target.args(),
                    "--concurrency",
                    str(self.concurrency),
                    "--app",
                    self.app,
                    *([] if self.async_slots is None else ["--async-slots", str(self.async_slots)]),
                ],
                cwd=ROOT,
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,  # a Ctrl-C reaches the harness, which stops the pool
            )
        finally:
            if not isinstance(stderr, int):
                stderr.close()
        try:
            line = self._readline(READY_TIMEOUT_S + 10)
            if line.strip() != "ready":
                raise RuntimeError(f"the pool process did not start (see {self.log}): {line!r}")
        except BaseException:
            self._kill()
            raise
        return self

    def cpu_seconds(self) -> float:
        """CPU seconds used so far by the pool process and its executors."""
        assert self.proc is not None
        return process_tree_cpu_seconds(self.proc.pid)

    def _readline(self, timeout_seconds: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_seconds)
        if not ready:
            raise TimeoutError(f"no answer from the pool process after {timeout_seconds:.0f}s")
        return self.proc.stdout.readline()

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self.proc is not None
        try:
            out, _ = self.proc.communicate(timeout=90)  # closes stdin: the pool's cue to stop
            lines = [line for line in out.splitlines() if line.startswith("{")]
            if lines:
                self.summary = json.loads(lines[-1])
        except subprocess.TimeoutExpired:
            self._kill()


class SharedPool:
    """One pool process per backend, started on first use and stopped by :meth:`close`."""

    def __init__(self, target: Target, log: Path) -> None:
        self.target = target
        self.log = log
        self._pool: PoolProcess | None = None

    def get(self) -> PoolProcess:
        """The running pool process (started now if it is not running yet)."""
        if self._pool is None or self._pool.proc is None or self._pool.proc.poll() is not None:
            self._pool = PoolProcess(self.target, log=self.log).__enter__()
        return self._pool

    def close(self) -> dict[str, Any]:
        """Stop the pool process, if one ran; its final summary."""
        if self._pool is None:
            return {}
        pool, self._pool = self._pool, None
        pool.__exit__(None, None, None)
        return pool.summary


class InProcessPool:
    """A pool on a thread of this process, sharing its wake signal (the embedded case)."""

    def __init__(self, db: Database, *, concurrency: int = CONCURRENCY) -> None:
        self.pool = WorkerPool(db, PoolConfig(queues={"default": concurrency}, app=APP))
        self.thread = threading.Thread(target=self.pool.run, name="bench-pool", daemon=True)

    def __enter__(self) -> InProcessPool:
        self.thread.start()
        try:
            wait_ready(self.pool, alive=self.thread.is_alive)
        except BaseException:
            self._stop()
            raise
        return self

    def _stop(self) -> None:
        self.pool.request_stop()
        self.thread.join(60)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()
