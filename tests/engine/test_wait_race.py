"""``wait_for`` hears a job finish however its start races with the settle, on both backends.

Each round inserts 16 jobs. Four spawned processes claim four each and complete them at one
wall-clock instant, give or take 30 ms; four more wait for four each, on a thread per job,
starting in that same window. The waiters' safety reads are spaced an hour apart, so on
PostgreSQL a wait ends in time only through its first read or the notification: a settle that
commits between the waiter's flag and its read, or a notification lost between the listener's
connection and the flag, times the wait out (30 s) and fails the test. On SQLite the waiters
read the job as they always do, and the test shows that they see every end.
"""

from __future__ import annotations

import random
import time
from typing import Any

from kickside_engine import Database, JobBuilder, JobState, get_job_statuses

from ..conftest import Target
from ..support import racing, wait_procs

SETTLERS = 4
WAITERS = 4
PER_PROCESS = 4
ROUNDS = 5
QUEUE = "wait-race"

procs = racing.spawned_processes(SETTLERS + WAITERS)


def test_waits_racing_settles_all_end_at_once(procs: Any, db: Database, target: Target) -> None:
    failures: list[str] = []
    for _ in range(ROUNDS):
        ids = [
            str(JobBuilder("w", {"i": i}, queue=QUEUE).insert(db).id)
            for i in range(SETTLERS * PER_PROCESS)
        ]
        at = time.time() + 1.5  # every settler has claimed and every waiter is up by then
        settles = procs.starmap_async(
            wait_procs.settle_at,
            [
                (target.url, target.schema, QUEUE, f"s{n}", PER_PROCESS, at, random.random())
                for n in range(SETTLERS)
            ],
        )
        waits = procs.starmap(
            wait_procs.wait_at,
            [
                (
                    target.url,
                    target.schema,
                    ids[n * PER_PROCESS : (n + 1) * PER_PROCESS],
                    at,
                    30.0,
                    random.random(),
                )
                for n in range(WAITERS)
            ],
        )
        settles.get(120)
        failures += [line for child in waits for line in child]
        states = get_job_statuses(db, ids)
        assert set(states.values()) == {JobState.COMPLETED}
    assert failures == []
