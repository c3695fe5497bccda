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


def exit_on_sigterm() -> None:
    """From now on, SIGTERM raises ``SystemExit(TERMINATED)`` in the main thread."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(TERMINATED)

    signal.signal(signal.SIGTERM, stop)
