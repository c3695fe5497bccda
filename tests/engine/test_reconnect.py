"""The retry schedule that pools, listeners and the dashboard follow when the database goes away."""

from __future__ import annotations

import random

import pytest

from kickside_engine.reconnect import RetryDelays, backoff_seconds, jittered


def test_the_schedule_doubles_from_its_base_to_its_cap() -> None:
    assert [backoff_seconds(n, 0.1, 5.0) for n in range(1, 9)] == pytest.approx(
        [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    )
    assert backoff_seconds(0, 0.1, 5.0) == 0.1  # a step before the first is the first
    assert backoff_seconds(3, 60.0, 15.0) == 60.0  # a cap below the base counts as the base
    assert backoff_seconds(10_000, 0.2, 15.0) == 15.0  # no overflow far past the cap


def test_jitter_only_ever_shortens_a_delay_by_up_to_its_fraction() -> None:
    rng = random.Random(7)
    draws = [jittered(10.0, 0.2, rng) for _ in range(2_000)]
    assert all(8.0 <= d <= 10.0 for d in draws)
    assert min(draws) < 8.2 and max(draws) > 9.8  # spread over the whole range, not fixed
    assert jittered(10.0, 0.0) == 10.0


def test_failures_in_a_row_back_off_and_a_success_starts_over() -> None:
    delays = RetryDelays(rng=random.Random(1))
    first = [delays.failed() for _ in range(8)]
    for n, wait in enumerate(first, start=1):
        top = backoff_seconds(n, 0.1, 5.0)
        assert 0.8 * top <= wait <= top, (n, first)
    assert delays.failures == 8
    delays.succeeded()
    assert delays.failures == 0
    assert 0.08 <= delays.failed() <= 0.1
