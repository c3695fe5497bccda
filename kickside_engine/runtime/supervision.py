"""The pool's background duties: keeping leases alive, and running the plugins each second."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from kickside_engine.clock import utcnow
from kickside_engine.hooks import Discarded, Hooks, Rescued, fire
from kickside_engine.store.database import Database
from kickside_engine.store.leases import expire_leases, leases_still_held, renew_leases
from kickside_engine.store.reconnect import Outage, RetryDelays

if TYPE_CHECKING:
    from kickside_engine.runtime.config import PoolConfig

log = logging.getLogger("kickside.pool")
plugin_log = logging.getLogger("kickside.plugins")
#: How often, in seconds, the lease keeper checks its leases against their renewal times.
CHECK_INTERVAL_SECONDS = 1.0
#: How often the plugins run while the database is there.
TICK_SECONDS = 1.0


class LeaseKeeper:
    """Renews this node's leases well before they expire and notices leases it lost.

    Every second it checks that each running job still holds its lease (an operator's cancel
    or a rescue takes it away); every third of the shortest lease held it extends them all,
    each by its own lease (a queue may have a lease of its own: ``PoolConfig.queue_leases``).

    It also knows, by its own clock, until when each lease is surely still held: from just
    before the claim (or the last renewal that succeeded) plus the job's lease, less a margin.
    A lease past that point may have been rescued by another node's Lifeline, so the pool
    stops its job (:meth:`overdue`) even when it cannot reach the database to ask: a pool cut
    off from the database must not run on beside the node that took the job over.
    """

    def __init__(self, db: Database, node: str, lease: timedelta) -> None:
        self.db = db
        self.node = node
        #: The lease of a token tracked without one of its own.
        self.lease = lease
        #: Each held token's lease.
        self.leases: dict[uuid.UUID, timedelta] = {}
        #: Monotonic time until which each lease is surely held.
        self.held_until: dict[uuid.UUID, float] = {}
        self._next_check = time.monotonic() + CHECK_INTERVAL_SECONDS
        self._next_renew = time.monotonic() + lease.total_seconds() / 3

    @property
    def next_due(self) -> float:
        """When :meth:`maintain` or :meth:`overdue` next has something to do."""
        due = min(self._next_check, self._next_renew)
        return min(due, min(self.held_until.values())) if self.held_until else due

    @property
    def fence_due(self) -> float:
        """When a lease held here may first run out unrenewed (infinity when none is held).

        Unlike :attr:`next_due` this needs no database: while it is away, checks and renewals
        stay overdue, and only this deadline should cut a backoff short.
        """
        return min(self.held_until.values(), default=math.inf)

    def track(self, token: uuid.UUID, since: float, lease: timedelta | None = None) -> None:
        """Keep ``token``'s lease alive; ``since`` is the monotonic time just before its claim,
        ``lease`` the lease the claim took (default :attr:`lease`)."""
        lease = lease if lease is not None else self.lease
        self.leases[token] = lease
        self.held_until[token] = since + safe_for(lease)
        self._next_renew = min(self._next_renew, since + lease.total_seconds() / 3)

    def forget(self, token: uuid.UUID) -> None:
        self.leases.pop(token, None)
        self.held_until.pop(token, None)

    def overdue(self, mono: float) -> set[uuid.UUID]:
        """Tokens whose lease may have run out unrenewed (forgotten here): stop their jobs."""
        late = {t for t, until in self.held_until.items() if mono >= until}
        for token in late:
            self.forget(token)
        return late

    def check_soon(self) -> None:
        self._next_check = 0.0

    def maintain(self, mono: float) -> set[uuid.UUID]:
        """Renew or check as due; returns the tokens whose lease is gone."""
        if not self.leases:
            self._next_check = mono + CHECK_INTERVAL_SECONDS
            self._next_renew = mono + self.lease.total_seconds() / 3
            return set()
        tokens = list(self.leases)
        if mono >= self._next_renew:
            started = time.monotonic()
            held = self._renew(tokens)
            for token in held & self.leases.keys():
                self.held_until[token] = started + safe_for(self.leases[token])
            shortest = min(self.leases[t] for t in tokens)
            self._next_renew = mono + shortest.total_seconds() / 3
            self._next_check = mono + CHECK_INTERVAL_SECONDS
        elif mono >= self._next_check:
            held = self._still_held(tokens)
            self._next_check = mono + CHECK_INTERVAL_SECONDS
        else:
            return set()
        lost = set(tokens) - held
        for token in lost:
            self.forget(token)
        return lost

    def _renew(self, tokens: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Extend each of ``tokens`` by its own lease: one statement per distinct lease."""
        by_lease: dict[timedelta, list[uuid.UUID]] = defaultdict(list)
        for token in tokens:
            by_lease[self.leases[token]].append(token)
        held: set[uuid.UUID] = set()
        now = utcnow()
        for lease, group in by_lease.items():
            held |= renew_leases(self.db, node=self.node, tokens=group, now=now, lease=lease)
        return held

    def _still_held(self, tokens: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        return leases_still_held(self.db, node=self.node, tokens=tokens)

    def expire_now(self, tokens: Sequence[uuid.UUID]) -> None:
        """End these leases now so the Lifeline can rescue their jobs without waiting."""
        expire_leases(self.db, node=self.node, tokens=tokens, now=utcnow())


def safe_for(lease: timedelta) -> float:
    """Seconds after the start of a claim or renewal during which its lease is surely held:
    the lease less a margin for clocks and the round trip (2 s, or a fifth of a short lease)."""
    seconds = lease.total_seconds()
    return seconds - min(2.0, seconds * 0.2)


class PluginThread:
    """Runs the plugins (stage, rescue, prune, cron) every second on a thread of its own.

    While the database is away it backs off (1 s doubling to 5 s, jittered: the schedule of
    :mod:`kickside_engine.store.reconnect`, from the tick's own second) and logs one line when the
    database goes and one when it is back, on the ``kickside.plugins`` logger.
    """

    def __init__(self, db: Database, config: PoolConfig, hooks: Hooks | None = None) -> None:
        self.db = db
        self.config = config
        #: The app's ``on_rescue`` and ``on_discard`` hooks, called for each Lifeline rescue.
        self.hooks = hooks or Hooks()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kickside-plugins", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _rescued(self, jobs: list[Rescued]) -> None:
        hooks = self.hooks
        for rescued in jobs:
            fire(hooks.on_rescue, rescued)
            if rescued.discarded and hooks.on_discard:
                error = "lease expired on its last attempt"
                fire(
                    hooks.on_discard,
                    Discarded(rescued.job_id, rescued.worker, rescued.queue, error),
                )

    def _run(self) -> None:
        from kickside_engine.plugins.runner import PluginSet

        plugins = PluginSet(
            schedule=tuple(self.config.schedule),
            prune_after=self.config.prune_after,
        )
        outage = Outage(plugin_log, RetryDelays(base_seconds=TICK_SECONDS))
        while not self._stop.is_set():
            try:
                report = plugins.tick(self.db, utcnow())
            except Exception as exc:
                self._stop.wait(outage.failed(exc))
                continue
            outage.succeeded()
            if report.rescue is not None and report.rescue.jobs:
                self._rescued(report.rescue.jobs)
            self._stop.wait(TICK_SECONDS)
