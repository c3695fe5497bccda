"""How long to wait before trying a lost database again: capped exponential backoff, jittered.

Everything in Kickside that keeps a connection to the database (a worker pool's loop, a
:func:`~kickside_engine.store.listen.listen` subscription, the dashboard) retries on this schedule
when the database goes away: the first retry after ``base`` seconds, each failure in a row
doubling the delay up to ``cap``. Retrying at a fixed short interval would have every pool and
dashboard hammer a restarting server several times a second. Each delay is shortened by up to
``jitter`` of itself at random, so that clients which lost one database together do not all
come back in the same instant. The first success starts the schedule over.

:class:`Outage` wraps the schedule for such a client and keeps its log readable: one line when
the database goes away and one when it is back, whatever the number of tries in between.

(The delay before a failed *job's* next attempt is another matter: :mod:`kickside_engine.backoff`.)
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kickside_engine.errors import KicksideError
from kickside_engine.redact import redact_text
from kickside_engine.store.driver_errors import unavailable_reason

#: The first delay after a lost connection.
FIRST_DELAY_SECONDS = 0.1
#: The longest delay between two tries.
MAX_DELAY_SECONDS = 5.0
#: A retry comes up to this fraction of its delay early.
JITTER = 0.2


def backoff_seconds(step: int, base_seconds: float, cap_seconds: float) -> float:
    """The ``step``-th delay of the schedule (1: the first), before jitter.

    ``base_seconds`` doubled ``step - 1`` times, at most ``cap_seconds`` (a cap below the base
    counts as the base).
    """
    cap = max(cap_seconds, base_seconds)
    exponent = min(max(step, 1) - 1, 32)  # 2**32 times any base is past any cap
    return min(base_seconds * 2.0**exponent, cap)


def jittered(seconds: float, jitter: float, rng: random.Random | None = None) -> float:
    """``seconds`` shortened by up to ``jitter`` of itself, at random."""
    draw = rng.random() if rng is not None else random.random()
    return seconds * (1.0 - jitter * draw)


@dataclass
class RetryDelays:
    """One client's retry schedule: :meth:`failed` gives the next wait, :meth:`succeeded`
    starts over."""

    base_seconds: float = FIRST_DELAY_SECONDS
    cap_seconds: float = MAX_DELAY_SECONDS
    jitter: float = JITTER
    rng: random.Random = field(default_factory=random.Random)
    #: Failures in a row since the last success.
    failures: int = 0

    def failed(self) -> float:
        """Another failure: the seconds to wait before the next try."""
        self.failures += 1
        nominal = backoff_seconds(self.failures, self.base_seconds, self.cap_seconds)
        return jittered(nominal, self.jitter, self.rng)

    def succeeded(self) -> None:
        """A try worked: the next failure waits ``base_seconds`` again."""
        self.failures = 0


class Outage:
    """One client's view of the database going away and coming back: when to try again, and
    one log line for each change.

    :meth:`failed` takes what a try raised and returns the seconds to wait (``delays``). A
    lost database (refused, dropped, unreachable, an SQLite file locked past its busy timeout:
    see :func:`~kickside_engine.store.driver_errors.unavailable_reason`) is logged once, as
    ``database unavailable, retrying in Ns: why``, and each further failed try only at DEBUG;
    :meth:`succeeded` logs ``database back after Ns`` once it is back. A 30-second failover is
    two lines per client, not one per try, and no traceback: the reason says it all. Any other
    error is a bug or a misconfiguration, and is logged at ERROR every time it happens (still
    backing off): a :class:`~kickside_engine.errors.KicksideError` as its one-line message,
    anything else with its traceback.

    Both lines are warnings, so that a log filtered to warnings keeps the pair.
    """

    def __init__(
        self,
        log: logging.Logger,
        delays: RetryDelays | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.delays = delays if delays is not None else RetryDelays()
        self._clock = clock
        #: When the current outage began (its first failed try, by ``clock``); None while up.
        self.down_since: float | None = None

    @property
    def down(self) -> bool:
        """Whether the last try found the database unavailable (no success since)."""
        return self.down_since is not None

    def failed(self, exc: BaseException) -> float:
        """A try raised ``exc``: log it as it deserves; returns the seconds to wait."""
        wait = self.delays.failed()
        reason = unavailable_reason(exc)
        if reason is not None:
            why = redact_text(reason)
            if self.down_since is None:
                self.down_since = self._clock()
                self.log.warning("database unavailable, retrying in %.1fs: %s", wait, why)
            else:
                self.log.debug("database still unavailable, retrying in %.1fs: %s", wait, why)
        elif isinstance(exc, KicksideError):
            self.log.error("%s (retrying in %.1fs)", redact_text(str(exc)), wait)
        else:
            self.log.error("unexpected error, retrying in %.1fs", wait, exc_info=exc)
        return wait

    def succeeded(self) -> None:
        """A try reached the database: log its return if it had gone; start the schedule over."""
        self.delays.succeeded()
        if self.down_since is not None:
            self.log.warning("database back after %.1fs", self._clock() - self.down_since)
            self.down_since = None
