"""Every `kickside` command, sorted into reads, audited actions and other writers.

The lists are explicit on purpose: a test walks the Typer app and fails when a command is in
none of them, so a new command must be classified (and, if it is an action, audited) before
the suite passes again. :func:`seed` builds the jobs, slots and queues the commands act on.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import typer

from kickside_engine import Database, JobBuilder, Workflow, enqueue
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, cancel_job, cancel_workflow, pause_queue
from kickside_engine.slots import disable_slot
from kickside_tui.cli.main import app

ADMIN = Actor("seeder", "localhost")


@dataclass(frozen=True)
class Seeded:
    """Ids of what :func:`seed` made, one target per action so that actions never collide."""

    wake: uuid.UUID
    retry: uuid.UUID
    cancel: uuid.UUID
    discard: uuid.UUID
    delete: uuid.UUID
    park: uuid.UUID
    resume: uuid.UUID
    read: uuid.UUID


def seed(db: Database) -> Seeded:
    """Jobs, slots, queues and a finished job for every command to work on."""
    later = timedelta(hours=1)

    def job(queue: str = "default", *, scheduled: bool = False) -> uuid.UUID:
        builder = JobBuilder("ok", {"n": 1}).queue(queue)
        return enqueue(db, builder.schedule_in(later) if scheduled else builder).id

    def slot(key: str, *, demand: bool = False) -> uuid.UUID:
        return enqueue(db, JobBuilder("ok", {}).slot("audit", "slots", key, demand=demand)).id

    seeded = Seeded(
        wake=job(scheduled=True),
        retry=job(scheduled=True),
        cancel=job(),
        discard=job(),
        delete=job(),
        park=slot("park", demand=True),
        resume=slot("resume"),
        read=job("reads"),
    )
    disable_slot(db, seeded.resume, actor=ADMIN)
    pause_queue(db, "audited", ADMIN, utcnow(), create=True)
    slot("purge")
    for queue in ("bulk-retry", "bulk-cancel", "bulk-discard"):
        for _ in range(2):
            job(queue, scheduled=True)
    cancel_job(db, job("old"), ADMIN, utcnow() - timedelta(days=30))
    for name in ("audit-cancel", "audit-retry"):
        wf = Workflow(name)
        wf.add("a", JobBuilder("ok", {}).queue("flows"))
        wf.add("b", JobBuilder("ok", {}).queue("flows"), after=["a"])
        wf.insert(db)
    cancel_workflow(db, "audit-retry", ADMIN, utcnow())  # something for the retry to run
    return seeded


@dataclass(frozen=True)
class Action:
    """An audited command: its argv for the seeded data, its audit action and target."""

    argv: Callable[[Seeded], list[str]]
    audit: str
    target: Callable[[Seeded], str] | None = None


ACTIONS: dict[str, Action] = {
    "enqueue": Action(lambda s: ["enqueue", "ok", "--args", '{"from": "audit"}'], "enqueue"),
    "wake": Action(lambda s: ["wake", str(s.wake)], "wake", lambda s: str(s.wake)),
    "park": Action(lambda s: ["park", "--yes", str(s.park)], "park", lambda s: str(s.park)),
    "resume": Action(lambda s: ["resume", str(s.resume)], "resume", lambda s: str(s.resume)),
    "retry": Action(lambda s: ["retry", str(s.retry)], "retry", lambda s: str(s.retry)),
    "cancel": Action(
        lambda s: ["cancel", "--yes", str(s.cancel)], "cancel", lambda s: str(s.cancel)
    ),
    "discard": Action(
        lambda s: ["discard", "--yes", str(s.discard)], "discard", lambda s: str(s.discard)
    ),
    "delete": Action(
        lambda s: ["delete", "--yes", str(s.delete)], "delete", lambda s: str(s.delete)
    ),
    "bulk retry": Action(
        lambda s: ["bulk", "retry", "--queue", "bulk-retry", "--yes"], "bulk_retry"
    ),
    "bulk cancel": Action(
        lambda s: ["bulk", "cancel", "--queue", "bulk-cancel", "--yes"], "bulk_cancel"
    ),
    "bulk discard": Action(
        lambda s: ["bulk", "discard", "--queue", "bulk-discard", "--yes"], "bulk_discard"
    ),
    "purge-slot": Action(
        lambda s: [
            "purge-slot",
            "--namespace",
            "audit",
            "--scope",
            "slots",
            "--key",
            "purge",
            "--yes",
        ],
        "purge_slot",
        lambda s: "audit/slots/purge",
    ),
    "queues pause": Action(
        lambda s: ["queues", "pause", "audited", "--yes"], "pause", lambda s: "audited"
    ),
    "queues resume": Action(
        lambda s: ["queues", "resume", "audited"], "resume", lambda s: "audited"
    ),
    "capacity set": Action(
        lambda s: [
            "capacity",
            "set",
            "audit.capacity",
            "--global-limit",
            "2",
            "--per-key-limit",
            "1",
            "--create",
        ],
        "capacity_set",
        lambda s: "audit.capacity",
    ),
    "workflow cancel": Action(
        lambda s: ["workflow", "cancel", "audit-cancel", "--yes"],
        "cancel_workflow",
        lambda s: "audit-cancel",
    ),
    "workflow retry": Action(
        lambda s: ["workflow", "retry", "audit-retry", "--yes"],
        "retry_workflow",
        lambda s: "audit-retry",
    ),
    "prune": Action(lambda s: ["prune", "--older-than-days", "7", "--yes"], "prune"),
    "reload": Action(lambda s: ["reload"], "reload"),
}

#: Commands that only read. Each reads the seeded data (``s.read`` is an available job).
READS: dict[str, Callable[[Seeded], list[str]]] = {
    "jobs": lambda s: ["jobs", "--json"],
    "job": lambda s: ["job", str(s.read), "--json"],
    "explain": lambda s: ["explain", str(s.read), "--json"],
    "slots": lambda s: ["slots", "--json"],
    "leases": lambda s: ["leases", "--json"],
    "queues": lambda s: ["queues", "--json"],
    "capacity": lambda s: ["capacity", "--json"],
    "workflow show": lambda s: ["workflow", "show", "audit-cancel", "--json"],
    "nodes": lambda s: ["nodes", "--json"],
    "cron": lambda s: ["cron", "--app", "tests.tui.fixtures", "--json"],
    "stats": lambda s: ["stats", "--json"],
    "audit": lambda s: ["audit", "--json"],
    "doctor": lambda s: ["doctor", "--json"],
    "migrate status": lambda s: ["migrate", "status", "--json"],
    "config": lambda s: ["config", "--json"],  # reads the options, never the database
}

#: Commands that write but are not operator actions on jobs (no audit row): they run pools,
#: demo traffic or migrations. ``--read-only`` refuses them all the same.
OTHER_WRITERS: dict[str, list[str]] = {
    "worker": ["worker", "--app", "tests.support.pool_app"],
    "demo": ["demo", "--seconds", "1"],
    "migrate": ["migrate"],
    "migrate down": ["migrate", "down", "base", "--yes"],
}


def command_paths() -> Iterator[str]:
    """Every runnable command of `kickside`, as space-separated paths ("queues pause")."""

    def walk(command: Any, path: list[str]) -> Iterator[str]:
        subcommands = getattr(command, "commands", None)
        if subcommands is None:
            yield " ".join(path)
            return
        if path and getattr(command, "invoke_without_command", False):
            yield " ".join(path)  # a group that runs on its own ("queues" lists them)
        for name, sub in subcommands.items():
            yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), [])
