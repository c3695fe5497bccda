"""How long to wait before trying a lost database again: capped exponential backoff, jittered.

Everything in Kickside that keeps a connection to the database (a worker pool's loop, a
:func:`~kickside_engine.listen.listen` subscription, the dashboard) retries on this schedule
when the database goes away: the first retry after ``base`` seconds, each failure in a row
doubling the delay up to ``cap``. Retrying at a fixed short interval would have every pool and
dashboard hammer a restarting server several times a second. Each delay is shortened by up to
``jitter`` of itself at random, so that clients which lost one database together do not all
come back in the same instant. The first success starts the schedule over.

(The delay before a failed *job's* next attempt is another matter: :mod:`kickside_engine.backoff`.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

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
