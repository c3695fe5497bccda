"""Retries: the default backoff, a worker's own Backoff, and what a failing job records."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from kickside_engine import (
    Backoff,
    Job,
    JobState,
    WorkerRegistry,
    connect_database,
    get_job,
    migrate,
)
from kickside_engine.testing import drain_jobs

registry = WorkerRegistry()

# attempt ** exponent + base seconds, plus up to jitter_per_attempt * attempt of jitter, capped.
GENTLE = Backoff(
    base=timedelta(seconds=5),
    exponent=2,
    jitter_per_attempt=timedelta(seconds=1),
    cap=timedelta(minutes=10),
)


@registry.worker("refresh_feed", max_attempts=3, backoff=GENTLE)
def refresh_feed(args: dict[str, Any], job: Job) -> None:
    raise ConnectionError(f"feed {args['feed']} unreachable (attempt {job.attempt})")


def seconds(policy: Backoff) -> list[float]:
    """The first four delays without jitter."""
    steady = replace(policy, jitter_per_attempt=timedelta(0))
    return [steady.policy_delay(attempt).total_seconds() for attempt in (1, 2, 3, 4)]


# The default: 16 s, 31 s, 96 s, 271 s... plus up to 30 s of jitter per attempt.
assert seconds(Backoff()) == [16, 31, 96, 271]
assert seconds(GENTLE) == [6, 9, 14, 21]

db = connect_database()
migrate.upgrade(db)
job_id = refresh_feed.new({"feed": "news"}).insert(db).id

drain_jobs(db, registry)  # attempt 1 fails: retryable, due after its backoff
job = get_job(db, job_id)
assert job is not None and job.state is JobState.RETRYABLE and job.attempt == 1

# with_scheduled=True runs retryable jobs now, as if their time had come: attempts 2 and 3
# fail too, and with max_attempts=3 used up the job is discarded.
drain_jobs(db, registry, with_scheduled=True)
job = get_job(db, job_id)
assert job is not None and job.state is JobState.DISCARDED
for error in job.errors:  # every attempt's error, redacted, newest last
    print(error.attempt, error.error.splitlines()[0])
