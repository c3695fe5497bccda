"""Workers the engine tests use, named for what they do (as the seed's kernel tests)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kickside_engine import Cancel, Discard, Job, RetryAfter, Snooze, WorkerRegistry
from kickside_engine.backoff import Backoff

registry = WorkerRegistry()
SEEN: list[tuple[str, Any]] = []


@registry.worker("ok")
def ok(args: dict[str, Any], job: Job) -> None:
    SEEN.append(("ok", args))


@registry.worker("fail", max_attempts=3, backoff=Backoff(base=timedelta(seconds=1)))
def fail(args: dict[str, Any], job: Job) -> None:
    raise RuntimeError(args.get("message", "boom"))


@registry.worker("snooze")
def snooze(args: dict[str, Any], job: Job) -> Snooze | None:
    if job.meta.get("snoozed", 0) >= int(args.get("times", 1)):
        return None
    return Snooze(timedelta(seconds=int(args.get("seconds", 60))))


@registry.worker("cancel")
def cancel(args: dict[str, Any], job: Job) -> Cancel:
    return Cancel(f"post {args.get('post_id')} deleted")


@registry.worker("discard")
def discard(args: dict[str, Any], job: Job) -> Discard:
    return Discard("invalid address")


@registry.worker("panic")
def panic(args: dict[str, Any], job: Job) -> None:
    _ = [][1]  # an IndexError, the Python cousin of a panic


@registry.worker("hang", timeout=timedelta(milliseconds=200))
def hang(args: dict[str, Any], job: Job) -> None:
    time.sleep(float(args.get("seconds", 2)))


@registry.worker("rate_limited", max_attempts=5)
def rate_limited(args: dict[str, Any], job: Job) -> None:
    raise RetryAfter("provider said slow down", after=timedelta(hours=2))


@dataclass
class Charge:
    customer_id: int
    amount: int


@registry.worker("charge", args_type=Charge)
def charge(args: Charge, job: Job) -> None:
    SEEN.append(("charge", args))


#: What ``leaky`` fails with, chosen by its ``leak`` arg: the seed's example first, then each
#: other secret shape that redaction must catch end to end.
LEAKS = {
    "seed_url": (
        "charge failed for https://deploy:not-a-password@api.example.com/v1/charges"
        "?token=not-a-token"
    ),
    "bearer_token": (
        "charge failed: api.example.com/v1/charges answered 401 to "
        "Authorization: Bearer not-a-bearer-token"
    ),
    "key_value_pairs": (
        "charge failed: api.example.com/v1/charges refused password=not-a-password "
        "secret=not-a-secret api_key=not-an-api-key"
    ),
    "postgresql_url": (
        "charge failed: could not connect to "
        "postgresql://deploy:not-a-db-password@db.internal:5432/charges"
    ),
}


@registry.worker("leaky")
def leaky(args: dict[str, Any], job: Job) -> None:
    raise RuntimeError(LEAKS[args.get("leak", "seed_url")])


@registry.worker("chatty")
def chatty(args: dict[str, Any], job: Job) -> None:
    raise RuntimeError("x" * 10_000)


@registry.worker("verify_identity", max_attempts=1, sensitive_keys={"ssn"})
def verify_identity(args: dict[str, Any], job: Job) -> None:
    """Writes the args it was given to ``args["record_to"]`` (so a test in another process
    sees exactly what a real pool delivered), then fails quoting them, as careless code does."""
    if "record_to" in args:
        with open(args["record_to"], "w") as fh:
            json.dump({"args": args, "meta": job.meta}, fh)
    raise RuntimeError(f"identity check failed for {args!r}")
