"""CPU seconds from Linux /proc: a process tree's (a pool, a peer's worker), and PostgreSQL's
own when the server runs on this machine.

The server's processes are the postmaster and its children (one backend per connection, plus
the checkpointer, WAL writer, ...). Their CPU is the sum of utime+stime of every live one,
plus what the postmaster's reaped children used (``cutime``+``cstime``: backends of connections
closed during the interval still count). It covers every client of the server, so it is only
this workload's cost when nothing else uses the server (the harness records the load average).
Standard library only at import time: the peers' driver uses it too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the peers' driver uses this module without Kickside installed
    from kickside_engine import Database

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name, from the state on."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def process_tree_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process and its descendants.

    Counts the live processes of the tree and the children they have already reaped (an
    executor replaced during a run still counts, through its parent).
    """
    ticks = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            ticks += sum(int(f) for f in _stat(current)[11:15])  # utime, stime, cutime, cstime
            pending += _children(current)
        except (OSError, ValueError):
            continue
    return ticks / _TICKS


class PostgresCpu:
    """CPU seconds of a local PostgreSQL server; :attr:`reason` says why not when unreadable."""

    def __init__(self, postmaster: int | None, reason: str | None = None) -> None:
        self.postmaster = postmaster
        self.reason = reason

    @classmethod
    def locate(cls, db: Database) -> PostgresCpu:
        """Find the server behind ``db``: the parent of this connection's backend process."""
        from sqlalchemy import text

        if not db.is_postgresql:
            return cls(None, "not PostgreSQL")
        with db.read() as conn:
            backend = int(conn.execute(text("SELECT pg_backend_pid()")).scalar_one())
        return cls.from_backend(backend)

    @classmethod
    def from_backend(cls, backend: int) -> PostgresCpu:
        """Find the server whose backend process (``pg_backend_pid()``) is ``backend``."""
        try:
            if Path(f"/proc/{backend}/comm").read_text().strip() != "postgres":
                return cls(None, f"pid {backend} here is not the server's backend (remote server?)")
            postmaster = int(_stat(backend)[1])
            _stat(postmaster)
        except (OSError, ValueError, IndexError) as exc:
            return cls(None, f"cannot read the server's /proc entries: {exc}")
        return cls(postmaster)

    def seconds(self) -> float | None:
        """CPU seconds the server has used so far (None when it cannot be read)."""
        if self.postmaster is None:
            return None
        try:
            fields = _stat(self.postmaster)
            ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
            for child in _children(self.postmaster):
                try:
                    ticks += sum(int(f) for f in _stat(child)[11:15])
                except (OSError, ValueError):
                    continue  # a backend that exited meanwhile: counted once reaped
        except (OSError, ValueError) as exc:
            self.reason = f"cannot read the server's /proc entries: {exc}"
            self.postmaster = None
            return None
        return ticks / _TICKS


def cpu_per_1000_jobs(
    n: int, pool_cpu: float, pg_before: float | None, pg_after: float | None
) -> dict[str, float]:
    """A run's CPU seconds per 1,000 of its ``n`` jobs: the pool's (``pool_cpu`` seconds), and
    PostgreSQL's and the sum of both when the server's CPU was read before and after."""
    figures = {"pool_cpu_s_per_1000_jobs": pool_cpu / n * 1000}
    if pg_before is not None and pg_after is not None:
        figures["pg_cpu_s_per_1000_jobs"] = (pg_after - pg_before) / n * 1000
        figures["cpu_s_per_1000_jobs"] = (pool_cpu + pg_after - pg_before) / n * 1000
    return figures
