"""The worker pool's configuration, and parsing ``--queues default:10,mailers:5``,
``--lease 30s`` and ``--queue-leases reports=5m``."""

from __future__ import annotations

import math
import multiprocessing
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

from kickside_engine.errors import ConfigurationError, InvalidArgumentError
from kickside_engine.plugins.cron import Recurring, validate_schedule
from kickside_engine.text import validate_name
from kickside_engine.workers import WorkerRegistry

DEFAULT_QUEUES = "default:10,mailers:5"
#: The shortest lease a pool takes: it renews every third of it, and stops a job about a
#: second before it may run out.
MIN_LEASE = timedelta(seconds=3)
#: The longest: a crashed node's jobs wait this long for the Lifeline.
MAX_LEASE = timedelta(days=1)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: A queue's per-node concurrency: how many of its jobs one pool runs at once.
MAX_CONCURRENCY = 1000


#: Platforms where CPython's multiprocessing cannot start processes.
NO_PROCESSES = frozenset({"emscripten", "wasi", "ios", "android"})


def process_executors_unsupported() -> str | None:
    """Why this platform cannot run process executors (``None``: it can).

    Executors are started with multiprocessing's ``spawn`` method, which every desktop and
    server platform has; browsers (Emscripten), WASI and mobile platforms have none.
    """
    if sys.platform in NO_PROCESSES:
        return f"{sys.platform} cannot start processes"
    if "spawn" not in multiprocessing.get_all_start_methods():
        return "multiprocessing has no 'spawn' start method on this platform"
    return None


def validate_queues(queues: Mapping[str, int]) -> dict[str, int]:
    """Check queue names and concurrencies (``PoolConfig`` and ``--queues`` alike).

    Each name is a valid queue name and each concurrency an integer in 1..MAX_CONCURRENCY;
    there is at least one queue. Raises :class:`InvalidArgumentError` naming the bad value.
    """
    if not isinstance(queues, Mapping) or not queues:
        raise InvalidArgumentError("no queues: give at least one, e.g. {'default': 10}")
    for name, concurrency in queues.items():
        validate_name(name, "queue", max_length=128)
        if (
            isinstance(concurrency, bool)
            or not isinstance(concurrency, int)
            or not 1 <= concurrency <= MAX_CONCURRENCY
        ):
            raise InvalidArgumentError(
                f"concurrency of queue {name!r} must be 1..{MAX_CONCURRENCY}, got {concurrency!r}"
            )
    return dict(queues)


def parse_queues(spec: str) -> dict[str, int]:
    """Parse ``name:concurrency,...`` (concurrency defaults to 10) into a dict."""
    queues: dict[str, int] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, _, limit = part.partition(":")
        try:
            concurrency = int(limit) if limit else 10
        except ValueError:
            raise InvalidArgumentError(
                f"invalid concurrency {limit!r} for queue {name!r}"
            ) from None
        queues[name.strip()] = concurrency
    if not queues:
        raise InvalidArgumentError(f"no queues in {spec!r}: use e.g. default:10,mailers:5")
    return validate_queues(queues)


def parse_duration(text: str, what: str = "duration") -> timedelta:
    """Parse ``30s``, ``5m``, ``2h``, ``1d``, ``1m30s`` or plain seconds (``90``, ``2.5``)."""
    spec = text.strip().lower()
    try:
        seconds = float(spec)
    except ValueError:
        parts = _DURATION.findall(spec)
        if not parts or "".join(n + u for n, u in parts) != spec:
            raise InvalidArgumentError(
                f"invalid {what} {text!r}: use a number of seconds or e.g. 30s, 5m, 2h, 1m30s"
            ) from None
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidArgumentError(f"invalid {what} {text!r}: it must be more than 0")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidArgumentError(f"invalid {what} {text!r}: too long") from None


def parse_queue_leases(spec: str) -> dict[str, timedelta]:
    """Parse ``queue=duration,...`` (``reports=5m,exports=1h``) into a dict (durations as
    :func:`parse_duration` reads them)."""
    leases: dict[str, timedelta] = {}
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        name, sep, duration = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidArgumentError(
                f"invalid queue lease {part!r}: use queue=duration, e.g. reports=5m"
            )
        validate_name(name, "queue", max_length=128)
        leases[name] = parse_duration(duration, f"lease for queue {name!r}")
    return leases


def _check_lease(lease: timedelta, what: str) -> None:
    if not MIN_LEASE <= lease <= MAX_LEASE:
        raise InvalidArgumentError(
            f"{what} must be from 3 seconds to 1 day, got {lease.total_seconds():g}s"
        )


@dataclass(frozen=True)
class PoolConfig:
    """How a pool runs.

    ``mode="process"`` (the default of ``kickside worker``) runs each job in an executor
    process importing ``app``; ``mode="thread"`` runs jobs on threads of this process with
    ``registry`` (embedding and tests: a hung job cannot be killed there).

    ``lease`` is how long a claim holds a job without renewal; ``queue_leases`` gives some
    queues a lease of their own (``{"reports": timedelta(minutes=5)}``). The pool renews each
    lease every third of it and stops a job whose lease it could not renew in time (the
    database unreachable), so that no other node runs it at the same time: a longer lease
    rides out a longer database failover, and a crashed node's jobs wait that much longer for
    the Lifeline (docs/guides/deploying.md, the lease and database failovers).

    ``schedule`` is the cron schedule the pool runs (with ``run_plugins``) and publishes on its
    heartbeat; ``kickside worker`` fills it from the app module's ``SCHEDULE``.
    """

    queues: dict[str, int] = field(default_factory=lambda: parse_queues(DEFAULT_QUEUES))
    app: str | None = None
    registry: WorkerRegistry | None = None
    mode: Literal["process", "thread"] = "process"
    node: str | None = None
    lease: timedelta = timedelta(seconds=30)
    queue_leases: Mapping[str, timedelta] = field(default_factory=dict)
    shutdown_grace: timedelta = timedelta(seconds=25)
    poll_interval: float = 1.0
    default_max_execution: timedelta = timedelta(minutes=5)
    prune_after: timedelta = timedelta(days=7)
    run_plugins: bool = True
    code_version: str | None = None
    schedule: Sequence[Recurring] = ()
    #: How many claimed jobs may wait in the supervisor for an executor to free up, while jobs
    #: are fast (they then start without waiting for a database round trip). None: as many as
    #: the executors get through during one database turn, from 2 to 96 per place (a process
    #: executor is one place, an async executor one per slot) and at most 1,000 in all unless
    #: two per place is more; 0: claim only for free places.
    prefetch: int | None = None
    #: How many process executors run sync jobs. None: when the app has a sync worker, the sum
    #: of the queues' concurrency, leaving out the queues that only its ``async def`` workers
    #: declare; else none.
    process_executors: int | None = None
    #: How many async executors run ``async def`` jobs, each an event loop with up to
    #: ``async_slots`` jobs at once. None: one when the app has an async worker, else none.
    #: (The pool reads the app's registry at start; one it cannot import there is learnt from
    #: the first executor that loads it.)
    async_executors: int | None = None
    #: How many jobs one async executor runs at once. None: the sum of the queues'
    #: concurrency, which bounds async jobs as it bounds sync ones, so that ``queues={"io":
    #: 200}`` runs 200 ``async def`` jobs at once on one event loop.
    async_slots: int | None = None
    #: How many jobs a process executor may be handed at once, to run one after another: one
    #: message there and one result per job back, instead of a round trip through the
    #: supervisor per job. None: up to 4 while executions average under 1 ms (and prefetch is
    #: not 0), else 1; 1: one job at a time. A queue's concurrency counts the executors that
    #: hold its jobs, so a batch never runs two of them at once.
    handoff_batch: int | None = None

    def __post_init__(self) -> None:
        validate_queues(self.queues)
        if self.mode == "process" and (why := process_executors_unsupported()):
            raise ConfigurationError(
                f"process executors are not supported here: {why}; run jobs on threads of "
                "this process instead (PoolConfig(mode='thread'), kickside worker --in-process)"
            )
        if self.mode == "process" and not self.app:
            raise InvalidArgumentError("a process pool needs app='module' (its WorkerRegistry)")
        if self.mode == "thread" and self.registry is None and not self.app:
            raise InvalidArgumentError("a thread pool needs a registry or app")
        if self.prefetch is not None and self.prefetch < 0:
            raise InvalidArgumentError("prefetch must be 0 or more")
        self._check_executors()
        interval = self.poll_interval
        if isinstance(interval, bool) or not isinstance(interval, int | float):
            raise InvalidArgumentError(f"poll_interval must be a number, got {interval!r}")
        if not 0.05 <= interval <= 3600:
            raise InvalidArgumentError(
                f"poll_interval must be from 0.05 to 3600 seconds, got {self.poll_interval!r}"
            )
        if self.prune_after < timedelta(0):
            raise InvalidArgumentError(f"prune_after must not be negative, got {self.prune_after}")
        self._check_leases()
        self._check_schedule()

    def _check_executors(self) -> None:
        if self.process_executors is not None and not 0 <= self.process_executors <= 1000:
            raise InvalidArgumentError(
                f"process_executors must be from 0 to 1000, got {self.process_executors}"
            )
        if self.async_executors is not None and not 0 <= self.async_executors <= 100:
            raise InvalidArgumentError(
                f"async_executors must be from 0 to 100, got {self.async_executors}"
            )
        if self.async_slots is not None and not 1 <= self.async_slots <= 10_000:
            raise InvalidArgumentError(
                f"async_slots must be from 1 to 10000, got {self.async_slots}"
            )
        if self.handoff_batch is not None and not 1 <= self.handoff_batch <= 100:
            raise InvalidArgumentError(
                f"handoff_batch must be from 1 to 100, got {self.handoff_batch}"
            )
        if self.process_executors == 0 and self.async_executors == 0:
            raise InvalidArgumentError(
                "a pool needs an executor: process_executors and async_executors are both 0"
            )

    def _check_leases(self) -> None:
        _check_lease(self.lease, "lease")
        for queue, lease in self.queue_leases.items():
            if queue not in self.queues:
                raise InvalidArgumentError(
                    f"a lease is given for queue {queue!r}, which this pool does not run "
                    f"(its queues: {', '.join(self.queues)})"
                )
            _check_lease(lease, f"the lease of queue {queue!r}")

    def lease_for(self, queue: str) -> timedelta:
        """The lease a claim of ``queue`` takes: its own, else :attr:`lease`."""
        return self.queue_leases.get(queue, self.lease)

    def _check_schedule(self) -> None:
        if isinstance(self.schedule, str | bytes) or not isinstance(self.schedule, Sequence):
            raise InvalidArgumentError("schedule must be a list of Recurring entries")
        validate_schedule(self.schedule)
        object.__setattr__(self, "schedule", tuple(self.schedule))  # frozen: one fixed copy

    @property
    def slots_per_async_executor(self) -> int:
        """How many jobs one async executor runs at once (see :attr:`async_slots`)."""
        if self.async_slots is not None:
            return self.async_slots
        return min(10_000, max(1, sum(self.queues.values())))

    @property
    def executors(self) -> int:
        """How many process executors the pool runs (see :attr:`process_executors`)."""
        if self.process_executors is not None:
            return self.process_executors
        return sum(self.queues.values())
