"""The worker pool's configuration, and parsing ``--queues default:10,mailers:5``."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from kickside_engine.errors import InvalidArgumentError
from kickside_engine.workers import WorkerRegistry, validate_name

DEFAULT_QUEUES = "default:10,mailers:5"


def parse_queues(spec: str) -> dict[str, int]:
    """Parse ``name:concurrency,...`` (concurrency defaults to 10) into a dict."""
    queues: dict[str, int] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, _, limit = part.partition(":")
        validate_name(name.strip(), "queue", max_length=128)
        try:
            concurrency = int(limit) if limit else 10
        except ValueError:
            raise InvalidArgumentError(
                f"invalid concurrency {limit!r} for queue {name!r}"
            ) from None
        if not 1 <= concurrency <= 1000:
            raise InvalidArgumentError(f"concurrency of queue {name!r} must be 1..1000")
        queues[name.strip()] = concurrency
    if not queues:
        raise InvalidArgumentError(f"no queues in {spec!r}: use e.g. default:10,mailers:5")
    return queues


@dataclass(frozen=True)
class PoolConfig:
    """How a pool runs.

    ``mode="process"`` (the default of ``kickside worker``) runs each job in an executor
    process importing ``app``; ``mode="thread"`` runs jobs on threads of this process with
    ``registry`` (embedding and tests: a hung job cannot be killed there).
    """

    queues: dict[str, int] = field(default_factory=lambda: parse_queues(DEFAULT_QUEUES))
    app: str | None = None
    registry: WorkerRegistry | None = None
    mode: Literal["process", "thread"] = "process"
    node: str | None = None
    lease: timedelta = timedelta(seconds=30)
    shutdown_grace: timedelta = timedelta(seconds=25)
    poll_interval: float = 1.0
    default_max_execution: timedelta = timedelta(minutes=5)
    prune_after: timedelta = timedelta(days=7)
    run_plugins: bool = True
    code_version: str | None = None
    schedule: tuple[object, ...] = ()
    #: How many claimed jobs may wait in the supervisor for an executor to free up, while jobs
    #: are fast (they then start without waiting for a database round trip). None: as many as
    #: the executors get through during one database turn, from 2 to 12 per executor; 0: claim
    #: only for free executors.
    prefetch: int | None = None

    def __post_init__(self) -> None:
        if self.mode == "process" and not self.app:
            raise InvalidArgumentError("a process pool needs app='module' (its WorkerRegistry)")
        if self.mode == "thread" and self.registry is None and not self.app:
            raise InvalidArgumentError("a thread pool needs a registry or app")
        if self.prefetch is not None and self.prefetch < 0:
            raise InvalidArgumentError("prefetch must be 0 or more")
        if self.lease.total_seconds() < 3:
            raise InvalidArgumentError("lease must be at least 3 seconds")

    @property
    def executors(self) -> int:
        return sum(self.queues.values())
