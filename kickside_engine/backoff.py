"""How long a failed job waits before its next attempt."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import timedelta

from kickside_engine.errors import InvalidArgumentError

#: The longest a retry hint or a snooze puts a job off: a longer one waits this long.
MAX_DELAY = timedelta(days=365)


@dataclass(frozen=True)
class Backoff:
    """``attempt ** exponent + base`` seconds, plus up to ``jitter_per_attempt * attempt`` jitter.

    The default is the seed's: about 16 s, 31 s, 96 s, 271 s…, so 20 attempts cover about three
    weeks. ``cap`` bounds the policy delay (never below ``base``). A retry floor
    (``retry_after_ms``) raises the delay to at least the floor, and may exceed the cap (a
    floor beyond :data:`MAX_DELAY` counts as :data:`MAX_DELAY`).
    """

    base: timedelta = timedelta(seconds=15)
    exponent: float = 4.0
    jitter_per_attempt: timedelta = timedelta(seconds=30)
    cap: timedelta | None = None

    def policy_delay(self, attempt: int, rng: random.Random | None = None) -> timedelta:
        """The delay after failed attempt number ``attempt`` (1-based), jitter included."""
        uniform = rng.uniform if rng is not None else random.uniform
        attempt = max(1, attempt)
        base_s = self.base.total_seconds()
        growth = min(float(attempt) ** self.exponent, 1e9)
        jitter = uniform(0, self.jitter_per_attempt.total_seconds() * attempt)
        seconds = growth + base_s + jitter
        if self.cap is not None:
            seconds = max(base_s, min(seconds, self.cap.total_seconds()))
        return timedelta(seconds=seconds)

    def delay(
        self, attempt: int, retry_after_ms: float | None = None, rng: random.Random | None = None
    ) -> timedelta:
        """The policy delay, raised to the retry floor when one is given."""
        delay = self.policy_delay(attempt, rng)
        if retry_after_ms is not None:
            floor_ms = min(retry_after_ms, MAX_DELAY / timedelta(milliseconds=1))
            delay = max(delay, timedelta(milliseconds=floor_ms))
        return delay


DEFAULT_BACKOFF = Backoff()


def retry_policy(backoff: Backoff, slot_backoff: Backoff | None, is_slot: bool) -> Backoff:
    """The retry policy: ``slot_backoff`` for slot jobs when set, else ``backoff``."""
    return (slot_backoff or backoff) if is_slot else backoff


def validate_retry_after_ms(value: object) -> float | None:
    """Validate an explicit ``retry_after_ms`` argument: None or a finite number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"retry_after_ms must be a number (ms), got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise InvalidArgumentError(f"retry_after_ms must be finite and >= 0, got {value!r}")
    return float(value)
