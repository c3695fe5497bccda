"""Stopping a benchmark cleanly: SIGTERM unwinds the run as Ctrl-C does.

By default SIGTERM ends a Python process where it stands: no ``finally`` runs, so a killed run
left its PostgreSQL schema (with its jobs) and its pool processes behind. Raised as
``SystemExit`` instead, it unwinds through the run's context managers, which drop the schemas and
stop the pools.
"""

from __future__ import annotations

import signal
from types import FrameType

#: The exit status of a run stopped by SIGTERM (128 + the signal's number, as shells report it).
TERMINATED = 128 + signal.SIGTERM

_terminated = False


def exit_on_sigterm() -> None:
    """From now on, SIGTERM raises ``SystemExit(TERMINATED)`` in the main thread."""

    def stop(signum: int, frame: FrameType | None) -> None:
        global _terminated
        _terminated = True
        raise SystemExit(TERMINATED)

    signal.signal(signal.SIGTERM, stop)


def check_terminated() -> None:
    """Raise ``SystemExit(TERMINATED)`` again if SIGTERM has arrived.

    The handler's own raise can be lost: a signal handled while the garbage collector runs a
    weakref callback (SQLAlchemy has some) raises inside that callback, and Python reports it
    as "Exception ignored" and carries on. A run then went to its end and exited 0. The run's
    polling loop and progress lines call this, so a lost raise comes back within a poll.
    """
    if _terminated:
        raise SystemExit(TERMINATED)
