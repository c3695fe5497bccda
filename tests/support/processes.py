"""Helpers for tests that drive real `kickside worker` processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def wait_for(condition: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def start_worker(
    cli_args: list[str],
    *,
    app: str = "tests.support.pool_app",
    queues: str = "default:4",
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    pythonpath: list[str] | None = None,
    log: Path | None = None,
    prefix: list[str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start `kickside worker` in its own process (and process group); ``prefix`` runs it
    through a command that then executes it in the same process (``taskset -c 0``)."""
    path = [str(ROOT), *(pythonpath or [])]
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join(path)}
    out = open(log, "ab") if log else None  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [
                *(prefix or []),
                sys.executable,
                "-m",
                "kickside_tui.cli",
                *cli_args,
                "worker",
                "--app",
                app,
                "--queues",
                queues,
                "--log-level",
                "DEBUG",
                *(extra or []),
            ],
            env=full_env,
            cwd=ROOT,
            stdout=out or subprocess.DEVNULL,
            stderr=out or subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        if out is not None:
            out.close()


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 30) -> int:
    """Signal the pool and wait for it to exit; kill it if it does not."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait(10)


#: A process that takes a SQLite file's write lock, says so, and holds it until its standard
#: input closes.
_LOCK_HOLDER = (
    "import sqlite3, sys\n"
    "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
    "conn.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\n"
    "sys.stdin.read()\n"
    "conn.execute('ROLLBACK')\n"
)


def hold_write_lock(path: Path) -> subprocess.Popen[str]:
    """Another process holding the SQLite file's write lock (``BEGIN IMMEDIATE``), until
    :func:`release_write_lock`."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "locked":
        proc.kill()
        proc.wait(30)
        proc.stdout.close()
        raise RuntimeError(f"the lock holder did not take {path}'s write lock")
    return proc


def release_write_lock(proc: subprocess.Popen[str]) -> None:
    """End a :func:`hold_write_lock` process, releasing the lock."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    proc.wait(30)
    proc.stdout.close()
