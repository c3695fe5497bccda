"""Uniqueness: at most one job per key, enforced by a unique index, no advisory locks.

The key is ``sha256("{worker}|{queue}|{selected args as canonical JSON}|{bucket}")``, where the
bucket is ``floor(now / period)`` (empty without a period: unique "while it exists"). With
``states="incomplete"`` (the default) the key is cleared when the job reaches a final state, so
an identical job can be enqueued afterwards; with ``"all"`` it lives until the Pruner deletes
the row.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from kickside_engine.errors import InvalidArgumentError

UniqueStates = Literal["incomplete", "all"]


@dataclass(frozen=True)
class Unique:
    """A uniqueness rule: build one with :meth:`args`, :meth:`args_keys` or :meth:`worker`."""

    by: Literal["args", "args_keys", "worker"] = "args"
    keys: tuple[str, ...] = ()
    period: timedelta | None = None
    states: UniqueStates = "incomplete"

    @classmethod
    def args(cls) -> Unique:
        """Unique by worker, queue and all args."""
        return cls(by="args")

    @classmethod
    def args_keys(cls, *keys: str) -> Unique:
        """Unique by worker, queue and the named args only."""
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise InvalidArgumentError("unique args_keys needs at least one non-empty key name")
        return cls(by="args_keys", keys=tuple(keys))

    @classmethod
    def worker(cls) -> Unique:
        """Unique by worker and queue, whatever the args."""
        return cls(by="worker")

    def within(self, period: timedelta) -> Unique:
        """Unique within time buckets of ``period`` (a debounce) instead of while it exists."""
        if period.total_seconds() <= 0:
            raise InvalidArgumentError(f"unique period must be positive, got {period}")
        return replace(self, period=period)

    def keep_all(self) -> Unique:
        """Keep the key after the job finishes, until the Pruner deletes the row."""
        return replace(self, states="all")

    def key(self, worker: str, queue: str, args: dict[str, Any], now: datetime) -> str:
        """The unique key for a job with these properties, at ``now``."""
        if self.by == "worker":
            selected: Any = None
        elif self.by == "args_keys":
            selected = {k: args.get(k) for k in self.keys}
        else:
            selected = args
        bucket = ""
        if self.period is not None:
            bucket = str(math.floor(now.timestamp() / self.period.total_seconds()))
        canonical = json.dumps(selected, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        raw = f"{worker}|{queue}|{canonical}|{bucket}"
        return hashlib.sha256(raw.encode()).hexdigest()
