"""The pool's side of progress: the latest value per running job, written once per tick.

Executors send a job's progress at most once a second (:mod:`kickside_engine.progress`); the
pool keeps only the latest value per lease and writes all of them together at most once per
:data:`~kickside_engine.progress.PROGRESS_INTERVAL_SECONDS` (one transaction, fenced by the
lease). A value still here when its job's outcome arrives goes into the settlement instead.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from kickside_engine.lifecycle import ExecutionResult
from kickside_engine.progress import PROGRESS_INTERVAL_SECONDS
from kickside_engine.store.database import Database
from kickside_engine.store.progress import write_progress


class ProgressBuffer:
    """Progress received from executors and not yet written, by lease token."""

    def __init__(self, interval_seconds: float = PROGRESS_INTERVAL_SECONDS) -> None:
        self.interval_seconds = interval_seconds
        self.latest: dict[uuid.UUID, Any] = {}
        self._next_write = 0.0

    def note(self, token: uuid.UUID, value: Any) -> None:
        """Keep ``value`` as the latest progress of the job of lease ``token``."""
        self.latest[token] = value

    def carried_by(self, token: uuid.UUID, result: ExecutionResult) -> ExecutionResult:
        """``result`` of the job of lease ``token``, carrying its unwritten progress (unless it
        brings a newer value of its own): the settle writes it, so it is no longer kept."""
        unwritten = self.latest.pop(token, None)
        if result.progress is not None or unwritten is None:
            return result
        return replace(result, progress=unwritten)

    def drop(self, tokens: set[uuid.UUID]) -> None:
        """Forget the progress of jobs whose lease is gone."""
        for token in tokens:
            self.latest.pop(token, None)

    @property
    def next_due(self) -> float:
        """When :meth:`write_due` next has something to do (monotonic; infinity when idle)."""
        return self._next_write if self.latest else float("inf")

    def write_due(self, db: Database, node: str, mono: float) -> None:
        """Write what is kept, if anything and the interval since the last write has passed.

        Values are forgotten only once written: a database error leaves them for the next try.
        """
        if not self.latest or mono < self._next_write:
            return
        batch = dict(self.latest)
        write_progress(db, node=node, progress=batch)
        for token, value in batch.items():
            if self.latest.get(token) is value:
                del self.latest[token]
        self._next_write = mono + self.interval_seconds
