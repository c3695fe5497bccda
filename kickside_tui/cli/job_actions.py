"""Actions on one job: wake, park, resume, retry, cancel, discard and delete.

Every action is audited with the OS user and host (``Actor.current()``), under the command's
name. ID is a full job id or its last 8 to 12 hex digits, as tables show it. Park (which
clears the slot's pending work), cancel, discard and delete ask on a terminal, take ``--yes``,
and refuse (exit 2) otherwise, as the dashboard asks.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated

import typer

from kickside_engine import Database, Job, JobState, NotFoundError, get_job
from kickside_engine.control import (
    Actor,
    cancel_job,
    delete_job,
    discard_job,
    park_job,
    resume_job,
    retry_job,
    wake_job,
)
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import (
    actor,
    handles_errors,
    job_id,
    now,
    open_database,
    writes,
)
from kickside_tui.cli.documents import job_document
from kickside_tui.cli.options import JobIdArgument, JsonOption, YesOption

JobActionFn = Callable[[Database, str, Actor, datetime], Job]


def _report(action: str, job: Job, as_json: bool, verb: str) -> None:
    if as_json:
        output.emit_json({"action": action, "job": job_document(job)})
        return
    if action == "delete":
        output.info(f"deleted job {job.id} (it was {job.state.value})")
    else:
        output.info(f"{verb} job {job.id}: now {job.state.value}")


_VERBS = {
    "retry": "retried",
    "resume": "resumed",
    "cancel": "cancelled",
    "discard": "discarded",
    "delete": "deleted",
}


def _act(
    ctx: typer.Context,
    ident: str,
    action: str,
    fn: JobActionFn,
    as_json: bool,
    *,
    confirm: str | None = None,
    yes: bool = False,
) -> None:
    """Resolve ``ident``, ask ``confirm`` (with the job's full id) unless ``yes``, then act."""
    parsed = job_id(ctx, ident)
    if confirm is not None:
        unless_yes(yes, confirm.format(id=parsed))
    job = fn(open_database(ctx), str(parsed), actor(), now())
    _report(action, job, as_json, _VERBS[action])


@handles_errors
@writes
def wake(
    ctx: typer.Context,
    ident: JobIdArgument,
    ensure_due: Annotated[
        bool,
        typer.Option(
            "--ensure-due", help="Leave a job that is already due or running exactly as it is."
        ),
    ] = False,
    ordinary: Annotated[
        bool,
        typer.Option(
            "--ordinary", help="Ordinary demand (new work for a slot) instead of a control wake."
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Wake a job: make pending work due now, or leave a follow-up on a running one."""
    parsed = job_id(ctx, ident)
    db = open_database(ctx)
    when = now()
    result = wake_job(
        db, parsed, control=not ordinary, ensure_due=ensure_due, now=when, actor=actor()
    )  # the wake and its audit row commit together
    details = {
        "control": not ordinary,
        "ensure_due": ensure_due,
        "woke": result.woke,
        "already_due": result.already_due,
        "state": result.state.value,
    }
    if as_json:
        output.emit_json({"action": "wake", **details, "job_id": result.job_id})
        return
    if result.already_due:
        output.info(f"job {parsed} is already due ({result.state.value}): left as it is")
    else:
        output.info(f"woke job {parsed}: now {result.state.value}")


@handles_errors
@writes
def park(
    ctx: typer.Context,
    ident: JobIdArgument,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Park a slot: it rests (pending demand and wakes cleared) until its next wake.

    Asks first, as the dashboard does (--yes for scripts), unless it is parked already.
    """
    parsed = job_id(ctx, ident)
    db = open_database(ctx)
    current = get_job(db, parsed)
    if current is None:
        raise NotFoundError(f"job {parsed} not found")
    if current.is_slot and current.state is not JobState.PARKED:
        unless_yes(
            yes,
            f"Park slot {parsed} ({current.state.value})? Its pending demand and "
            "wakes are cleared.",
        )
    _report("park", park_job(db, parsed, now=now(), actor=actor()), as_json, "parked")


@handles_errors
@writes
def resume(ctx: typer.Context, ident: JobIdArgument, as_json: JsonOption = False) -> None:
    """Resume a job: enable a disabled slot, wake a parked one; for anything else, retry.

    A disabled slot goes back in service (due now if a wake is pending, else parked); a parked
    slot gets a control wake; any other job (a one-shot job, or a slot waiting on a retry) is
    retried: made available now, as `kickside retry` does. Audited as resume.
    """
    _act(ctx, ident, "resume", resume_job, as_json)


@handles_errors
@writes
def retry(ctx: typer.Context, ident: JobIdArgument, as_json: JsonOption = False) -> None:
    """Retry / run now: make a retryable, scheduled, parked or finished job available now."""
    _act(ctx, ident, "retry", retry_job, as_json)


@handles_errors
@writes
def cancel(
    ctx: typer.Context,
    ident: JobIdArgument,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Cancel a job that is not final (an executing one is aborted on its node)."""
    _act(ctx, ident, "cancel", cancel_job, as_json, yes=yes, confirm="Cancel job {id}?")


@handles_errors
@writes
def discard(
    ctx: typer.Context,
    ident: JobIdArgument,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Discard a job that is not final (an executing one is aborted on its node)."""
    _act(ctx, ident, "discard", discard_job, as_json, yes=yes, confirm="Discard job {id}?")


@handles_errors
@writes
def delete(
    ctx: typer.Context,
    ident: JobIdArgument,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Delete a job that is not executing, with its run history."""
    _act(
        ctx,
        ident,
        "delete",
        delete_job,
        as_json,
        yes=yes,
        confirm="Delete job {id} and its run history?",
    )
