"""Issue 26's work per job, counted the same way for every system on SQLite.

SQLite's own statement trace (``sqlite3.Connection.set_trace_callback``) sees every statement
a connection runs, whatever library sent it (SQLAlchemy, a driver call, Huey's storage), so
Kickside's and Huey's figures come from one counter. Per phase it counts the statements
(transaction control apart), the writes among them, the commits and the commits that wrote
(``COMMIT`` after a transaction that changed rows, and a writing statement run outside any
transaction, which commits by itself); the caller adds the rows written, read from SQLite's
``total_changes`` around each phase's calls. Imported by the peers' virtualenv too: nothing
here imports Kickside.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

WORK_PHASES = ("enqueue", "claim", "settle")
#: A statement that writes (a ``WITH ... UPDATE ... RETURNING`` too).
WRITE = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
#: Transaction control: commits are counted apart.
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "END")
FIGURES = ("statements", "writes", "rows_written", "commits", "writing_commits")


class StatementTrace:
    """Counts, per phase, what the traced connections run while ``phase`` is set."""

    def __init__(self) -> None:
        self.phase = ""
        self.counts: dict[str, dict[str, float]] = {
            p: dict.fromkeys(FIGURES, 0) for p in WORK_PHASES
        }
        self.sql: dict[str, set[str]] = {p: set() for p in WORK_PHASES}
        self._began: dict[int, int] = {}

    def attach(self, conn: sqlite3.Connection) -> None:
        """Trace ``conn`` (until :meth:`detach`)."""
        conn.set_trace_callback(lambda statement: self.trace(conn, statement))

    @staticmethod
    def detach(conn: sqlite3.Connection) -> None:
        conn.set_trace_callback(None)

    def trace(self, conn: sqlite3.Connection, statement: str) -> None:
        """One statement ``conn`` is about to run."""
        if not self.phase:
            return
        mine = self.counts[self.phase]
        head = statement.lstrip().upper()
        if head.startswith("BEGIN"):
            self._began[id(conn)] = conn.total_changes
        elif head.startswith(("COMMIT", "END")):
            mine["commits"] += 1
            mine["writing_commits"] += conn.total_changes > self._began.pop(id(conn), 0)
        elif not head.startswith(CONTROL):
            mine["statements"] += 1
            writes = bool(WRITE.search(statement))
            mine["writes"] += writes
            if writes and not conn.in_transaction:  # a statement that commits by itself
                mine["commits"] += 1
                mine["writing_commits"] += 1
            self.sql[self.phase].add(shape(statement))

    def add_rows(self, phase: str, rows: int) -> None:
        self.counts[phase]["rows_written"] += rows

    def metrics(self, n: int) -> dict[str, float]:
        """Every figure per job, per phase and summed (fsyncs derived: see :data:`FSYNCS`)."""
        metrics: dict[str, float] = {}
        for phase in WORK_PHASES:
            for key, value in self.counts[phase].items():
                metrics[f"{phase}_{key}_per_job"] = value / n
        metrics.update(
            statements_per_job=sum(metrics[f"{p}_statements_per_job"] for p in WORK_PHASES),
            rows_written_per_job=sum(metrics[f"{p}_rows_written_per_job"] for p in WORK_PHASES),
            commits_per_job=sum(self.counts[p]["commits"] for p in WORK_PHASES) / n,
            fsyncs_per_job_full=sum(self.counts[p]["writing_commits"] for p in WORK_PHASES) / n,
            fsyncs_per_job_normal=0.0,
        )
        return metrics

    def statements(self) -> dict[str, list[str]]:
        return {p: sorted(self.sql[p]) for p in WORK_PHASES}


FSYNCS = (
    "derived, not counted: in WAL mode a commit that wrote pages fsyncs the WAL once at FULL, "
    "never at NORMAL (only checkpoints fsync)"
)
COUNTED_WITH = "sqlite3 set_trace_callback and total_changes"


def shape(statement: str) -> str:
    """A statement with its literals as ``?`` (the trace shows them expanded)."""
    return re.sub(r"x?'[^']*'|\b\d+(\.\d+)?\b", "?", " ".join(statement.split()))[:160]


def indexes_by_table(rows: Any) -> dict[str, list[str]]:
    """``(table, index)`` rows from ``sqlite_master`` as each table's index names."""
    by_table: dict[str, list[str]] = {}
    for table, name in rows:
        by_table.setdefault(table, []).append(name)
    return by_table
