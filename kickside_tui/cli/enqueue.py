"""`kickside enqueue WORKER`: insert a one-shot job or enroll a slot from the command line."""

from __future__ import annotations

import os
import sys
from datetime import datetime
from typing import Annotated

import typer

from kickside_engine import InvalidArgumentError, JobBuilder, Unique, enqueue
from kickside_engine.control import record_audit
from kickside_engine.runtime import load_registry
from kickside_tui.cli import output
from kickside_tui.cli.context import (
    actor,
    app_spec,
    duration,
    handles_errors,
    json_object,
    names,
    now,
    open_database,
    writes,
)
from kickside_tui.cli.options import JsonOption


def _unique(rule: str | None, period_seconds: float | None) -> Unique | None:
    """``args``, ``worker`` or ``keys:a,b``, optionally within ``period_seconds``."""
    if rule is None:
        if period_seconds is not None:
            raise InvalidArgumentError("--unique-period needs --unique")
        return None
    if rule == "args":
        unique = Unique.args()
    elif rule == "worker":
        unique = Unique.worker()
    elif rule.startswith("keys:"):
        keys = [k.strip() for k in rule[len("keys:") :].split(",") if k.strip()]
        unique = Unique.args_keys(*keys)
    else:
        raise InvalidArgumentError(
            f"--unique must be args, worker or keys:NAME[,NAME...], got {rule!r}"
        )
    if period_seconds is not None:
        if period_seconds <= 0:
            raise InvalidArgumentError(f"--unique-period must be positive, got {period_seconds}")
        unique = unique.within(duration(period_seconds, "--unique-period"))
    return unique


def _schedule_at(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgumentError(f"--schedule-at is not an ISO-8601 time: {text!r}") from None
    if when.tzinfo is None:
        raise InvalidArgumentError(
            f"--schedule-at must carry a timezone (e.g. {text}Z or {text}+00:00)"
        )
    return when


def _builder(worker: str, args: str, app: str | None) -> JobBuilder:
    decoded = json_object(args, "--args")
    if app is None:
        return JobBuilder(worker, decoded)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the app module is found from here
    spec = load_registry(app_spec(app)).get(worker)
    if spec is None:
        raise InvalidArgumentError(f"worker {worker!r} is not registered in {app}")
    return spec.new(decoded)


@handles_errors
@writes
def enqueue_command(
    ctx: typer.Context,
    worker: Annotated[str, typer.Argument(help="The worker's permanent name.")],
    args: Annotated[str, typer.Option("--args", help="The job's args: a JSON object.")] = "{}",
    queue: Annotated[
        str | None, typer.Option("--queue", help="Queue (default: the worker's, else 'default').")
    ] = None,
    priority: Annotated[int | None, typer.Option("--priority", help="0 (highest) .. 9.")] = None,
    schedule_in: Annotated[
        float | None,
        typer.Option("--schedule-in", metavar="SECONDS", help="Run after this many seconds."),
    ] = None,
    schedule_at: Annotated[
        str | None,
        typer.Option("--schedule-at", metavar="ISO", help="Run at this time (with a timezone)."),
    ] = None,
    max_attempts: Annotated[
        int | None,
        typer.Option("--max-attempts", metavar="N", help="Attempts before the job is discarded."),
    ] = None,
    tags: Annotated[
        list[str] | None,
        typer.Option("--tag", help="A tag; repeat it for several (a comma is part of the tag)."),
    ] = None,
    meta: Annotated[str | None, typer.Option("--meta", help="Meta: a JSON object.")] = None,
    unique: Annotated[
        str | None,
        typer.Option(
            "--unique",
            metavar="args|worker|keys:A,B",
            help="At most one such job while incomplete.",
        ),
    ] = None,
    unique_period: Annotated[
        float | None,
        typer.Option("--unique-period", metavar="SECONDS", help="Unique per time bucket instead."),
    ] = None,
    slot: Annotated[
        bool,
        typer.Option("--slot", help="Enroll a slot job (needs --namespace, --scope and --key)."),
    ] = False,
    namespace: Annotated[str | None, typer.Option("--namespace", help="Slot namespace.")] = None,
    scope: Annotated[str | None, typer.Option("--scope", help="Slot scope.")] = None,
    key: Annotated[str | None, typer.Option("--key", help="Slot key.")] = None,
    demand: Annotated[bool, typer.Option("--demand", help="Ask the slot to run now.")] = False,
    concurrency_key: Annotated[
        str | None,
        typer.Option(
            "--concurrency-key",
            metavar="KEY",
            help="Concurrency key: its capacity group limits running jobs per key.",
        ),
    ] = None,
    max_execution: Annotated[
        float | None,
        typer.Option("--max-execution", metavar="SECONDS", help="Kill an attempt running longer."),
    ] = None,
    app: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="Module with the WorkerRegistry whose defaults to use (module[:attribute]).",
        ),
    ] = None,
    sensitive_keys: Annotated[
        list[str] | None,
        typer.Option(
            "--sensitive-key",
            metavar="NAME",
            help="Args keys to redact wherever the job is shown (repeat, or comma-separate; "
            "--app adds the worker's declared ones).",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Enqueue a job for WORKER; with --namespace/--scope/--key (or --slot) enroll a slot.

    Prints the job's id, whether an existing unique job (or slot) was found instead, and its
    state. Options left out take the worker's defaults when --app names its registry.
    """
    builder = _builder(worker, args, app)
    if sensitive_keys:
        builder = builder.sensitive_keys(list(names(sensitive_keys)))
    if queue is not None:
        builder = builder.queue(queue)
    if priority is not None:
        if not 0 <= priority <= 9:
            raise InvalidArgumentError(f"--priority must be 0..9, got {priority}")
        builder = builder.priority(priority)
    if schedule_in is not None and schedule_at is not None:
        raise InvalidArgumentError("give --schedule-in or --schedule-at, not both")
    if schedule_in is not None:
        builder = builder.schedule_in(duration(schedule_in, "--schedule-in"))
    if schedule_at is not None:
        builder = builder.schedule_at(_schedule_at(schedule_at))
    if max_attempts is not None:
        builder = builder.max_attempts(max_attempts)
    for tag in tags or []:
        builder = builder.tag(tag)
    if meta is not None:
        builder = builder.meta(json_object(meta, "--meta"))
    rule = _unique(unique, unique_period)
    if rule is not None:
        builder = builder.unique(rule)
    if slot or namespace is not None or scope is not None or key is not None:
        # Empty or missing identity parts are rejected by the engine, naming the part.
        builder = builder.slot(namespace or "", scope or "", key or "", demand=demand)
    elif demand:
        raise InvalidArgumentError("--demand applies to slot jobs: add --namespace/--scope/--key")
    if concurrency_key is not None:
        builder = builder.concurrency_key(concurrency_key)
    if max_execution is not None:
        if max_execution <= 0:
            raise InvalidArgumentError(f"--max-execution must be positive, got {max_execution}")
        builder = builder.max_execution(duration(max_execution, "--max-execution"))
    db = open_database(ctx)
    when = now()
    with db.begin() as conn:  # the job and its audit row commit together
        inserted = enqueue(db, builder, conn=conn, now=when)
        opts = builder.options
        details = {
            "worker": opts.worker,
            "queue": opts.queue,
            "kind": opts.kind.value,
            "duplicate": inserted.duplicate,
            "state": inserted.state.value,
        }
        record_audit(db, conn, actor(), "enqueue", "job", str(inserted.id), details, when)
    document = {"id": inserted.id, "duplicate": inserted.duplicate, "state": inserted.state}
    if as_json:
        output.emit_json(document)
        return
    verb = "found existing" if inserted.duplicate else "enqueued"
    output.info(f"{verb} job {inserted.id} ({inserted.state.value})")
