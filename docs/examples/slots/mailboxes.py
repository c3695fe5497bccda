"""Slot jobs: one durable job per mailbox that runs whenever it has demand and parks between.

drain_jobs runs the due jobs here, in this thread, so every step can be checked; a pool runs
the same slots the same way.
"""

from __future__ import annotations

from typing import Any

from kickside_engine import (
    Done,
    Job,
    JobState,
    WakeKey,
    WorkerRegistry,
    connect_database,
    get_job,
    migrate,
    nudge_workers,
    wake_job,
    wake_multi,
)
from kickside_engine.testing import drain_jobs

registry = WorkerRegistry()
db = connect_database()
migrate.upgrade(db)
INBOX: dict[str, list[str]] = {"ada": [], "bob": []}  # stands in for the application's tables
runs: list[str] = []


@registry.worker("sync_mailbox", queue="mail")
def sync_mailbox(args: dict[str, Any], job: Job) -> Done:
    mailbox = args["mailbox"]
    runs.append(f"{mailbox}: {len(INBOX[mailbox])} message(s)")
    if INBOX[mailbox] == ["hello"]:
        # New mail arrives while this run is going on: ordinary demand on a running slot
        # leaves a follow-up run (this run read the inbox before the mail arrived).
        deliver("ada", "late message")
    return Done()  # park, unless demand arrived during the run


def deliver(mailbox: str, message: str) -> None:
    """The application's write and the slot's demand, committed together."""
    with db.begin() as conn:
        INBOX[mailbox].append(message)  # (a real application writes a row with conn)
        wake_multi(db, [WakeKey("mail", "inbox", mailbox)], conn=conn)
    nudge_workers(db)  # after the commit: tell the pools (0 when none is running)


# Enroll one slot per mailbox: (namespace, scope, key) is its durable identity.
slot_ids = {
    name: sync_mailbox.new({"mailbox": name}).slot("mail", "inbox", name).insert(db).id
    for name in INBOX
}
again = sync_mailbox.new({"mailbox": "ada"}).slot("mail", "inbox", "ada").insert(db)
assert again.duplicate and again.id == slot_ids["ada"]  # enrolling twice finds the same slot


def state(name: str) -> JobState:
    job = get_job(db, slot_ids[name])
    assert job is not None
    return job.state


drain_jobs(db, registry)  # a new slot runs once (no run would ever see its first demand)
assert state("ada") is JobState.PARKED and state("bob") is JobState.PARKED
runs.clear()

deliver("ada", "hello")  # ordinary demand: the parked slot is due now
drain_jobs(db, registry)
assert runs == ["ada: 1 message(s)", "ada: 2 message(s)"]  # the run, then its follow-up
assert state("ada") is JobState.PARKED and state("bob") is JobState.PARKED

wake_job(db, slot_ids["bob"])  # a control wake (an operator, or `kickside wake`): run once
drain_jobs(db, registry)
assert runs[-1] == "bob: 0 message(s)" and state("bob") is JobState.PARKED
print(runs)
