"""When the dashboard tries again after a load failed: capped exponential backoff with jitter.

While the database is away, retrying at the refresh interval would have every open dashboard
hammer it (and a restarting server) several times a second. Instead the first failure puts the
next try ``base`` seconds off (the refresh interval), and each scheduled try that fails doubles
the delay, up to ``cap`` seconds (never less than ``base``); each delay is shortened by up to
``jitter`` of itself at random, so that dashboards which lost one database together do not all
come back in step. A load that fails in between (a key, a view switch) leaves the schedule as
it is. The first load that works resets it. The schedule itself is the engine's
(:mod:`kickside_engine.store.reconnect`), which pools and listeners follow too; the dashboard's
differs in its base (the refresh interval) and cap.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

from kickside_engine.control import backoff_seconds, jittered

#: The longest the dashboard waits between two tries (unless the refresh interval is longer).
RECONNECT_CAP_SECONDS = 15.0
#: A retry comes up to this fraction of its delay early.
RECONNECT_JITTER = 0.2


@dataclass
class Reconnect:
    """The dashboard's retry schedule while its loads fail (the app holds one).

    ``delays_seconds`` lists every delay scheduled since the last load that worked, so a test
    can check the schedule without timing it.
    """

    cap_seconds: float = RECONNECT_CAP_SECONDS
    jitter: float = RECONNECT_JITTER
    rng: random.Random = field(default_factory=random.Random)
    #: Failed loads in a row, the scheduled tries and those in between.
    failures: int = 0
    #: ``time.monotonic()`` of the next try, None while loads work.
    retry_at: float | None = None
    delays_seconds: list[float] = field(default_factory=list)
    #: The scheduled try has begun: its failure schedules the next one.
    due: bool = False

    @property
    def waiting(self) -> bool:
        """Whether loads are failing, so only the scheduled retry should try again."""
        return self.retry_at is not None

    def failed(self, base_seconds: float) -> float | None:
        """A load failed: the delay until the next try, now scheduled; None if one already is.

        The first failure, and the failure of the scheduled try (see :meth:`retrying`), each
        schedule the next try further off; a failure in between changes nothing else.
        """
        self.failures += 1
        if self.retry_at is not None and not self.due:
            return None
        self.due = False
        nominal = backoff_seconds(len(self.delays_seconds) + 1, base_seconds, self.cap_seconds)
        delay = jittered(nominal, self.jitter, self.rng)
        self.delays_seconds.append(delay)
        self.retry_at = time.monotonic() + delay
        return delay

    def retrying(self) -> None:
        """The scheduled try is starting."""
        self.due = True

    def succeeded(self) -> None:
        """A load worked: the next failure starts the schedule again from ``base``."""
        self.failures = 0
        self.retry_at = None
        self.due = False
        self.delays_seconds.clear()

    def remaining(self) -> float:
        """Seconds until the scheduled try (0 when it is due, or none is scheduled)."""
        if self.retry_at is None:
            return 0.0
        return max(0.0, self.retry_at - time.monotonic())
