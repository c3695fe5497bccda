"""signup.py: application code under test: a signup enqueues a welcome mail."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kickside_engine import Database, Discard, Job, WorkerRegistry

registry = WorkerRegistry()
SENT: list[str] = []  # stands in for a mail service


@registry.worker("welcome_mail", queue="mailers", max_attempts=3)
def welcome_mail(args: dict[str, Any], job: Job) -> Discard | None:
    if "@" not in args["email"]:
        return Discard(f"not an address: {args['email']}")
    SENT.append(args["email"])
    return None


def sign_up(db: Database, email: str) -> None:
    with db.begin() as conn:
        # ... insert the user with conn ...
        welcome_mail.new({"email": email}).schedule_in(timedelta(minutes=10)).insert(db, conn=conn)
