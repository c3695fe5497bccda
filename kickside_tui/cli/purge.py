"""`kickside purge-slot`: remove a retired slot and its settled run history.

By default one call of the engine's purge (at most 100 runs): a conflict exits 4 with its
details (how to continue). ``--until-done`` follows the continuation contract itself: it calls
again at once on ``needs_continue``, waits (polling, with a spinner) on ``wait_for``, and gives
up with exit 4 when it would still be waiting ``--timeout`` seconds after it started.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import Annotated, Any

import typer

from kickside_engine import ConflictError, Database, InvalidArgumentError
from kickside_engine.control import list_runs
from kickside_engine.purge import RUNS_PER_CALL
from kickside_engine.purge import purge_slot as engine_purge_slot
from kickside_engine.slots import list_slots
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.options import JsonOption, YesOption

#: How often --until-done looks again while the slot waits for a lease or a settlement.
POLL_SECONDS = 0.5
#: Slots of one namespace and scope searched for the purged slot's id (to count its runs).
SLOT_LOOKUP_LIMIT = 10_000


def wait(seconds: float) -> None:
    """Pause between polls while the slot waits (a seam: tests end the run meanwhile)."""
    time.sleep(seconds)


def _identity(namespace: str, scope: str, key: str) -> str:
    return f"{namespace}/{scope}/{key}"


def _continuation(exc: ConflictError) -> dict[str, Any]:
    """The conflict's details when it is the purge continuation contract; else re-raise."""
    if not exc.details.get("cleanup_pending"):
        raise exc
    return exc.details


def _slot_id(db: Database, namespace: str, scope: str, key: str) -> uuid.UUID | None:
    for info in list_slots(db, namespace=namespace, scope=scope, limit=SLOT_LOOKUP_LIMIT):
        if info.key == key:
            return info.job_id
    return None


def _settled_runs(db: Database, job_id: uuid.UUID) -> int:
    return sum(1 for run in list_runs(db, job_id) if run.settled)


def _until_done(
    db: Database, namespace: str, scope: str, key: str, timeout: float
) -> tuple[int, int, int]:
    """Purge until the slot is gone; returns (removed, runs deleted, calls).

    The engine reports the runs each pending page deleted, but not those of the final page
    (it returns 1), so the settled runs left are counted from the run history whenever the
    next page may be the last: once at the start and when at most a page remains.
    """
    deadline = time.monotonic() + timeout
    name = _identity(namespace, scope, key)
    job_id = _slot_id(db, namespace, scope, key)
    left: int | None = None  # settled runs not yet deleted, when known
    runs = calls = 0
    with output.progress(f"purging {name}") as tracker:
        while True:
            if job_id is not None and (left is None or left <= RUNS_PER_CALL):
                left = _settled_runs(db, job_id)
            calls += 1
            try:
                removed = engine_purge_slot(
                    db, namespace=namespace, scope=scope, key=key, now=now(), actor=actor()
                )
            except ConflictError as exc:
                details = _continuation(exc)
                deleted = int(details.get("runs_deleted", 0))
                runs += deleted
                job_id = job_id or uuid.UUID(str(details["job_id"]))
                tracker.update(completed=runs, description=f"purging {name}: {runs} runs deleted")
                if details.get("needs_continue"):
                    left = left - deleted if left is not None else None
                    continue
                left = None  # every settled run is gone; the ones settling next are few
                wait_for = details.get("wait_for", "settlement")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise ConflictError(
                        f"slot {name}: still waiting for {wait_for} after {timeout:g}s "
                        f"({runs} runs deleted); run purge-slot again later",
                        details={**details, "runs_deleted": runs, "timed_out": True},
                    ) from None
                tracker.update(
                    description=f"purging {name}: {runs} runs deleted, waiting for {wait_for}"
                )
                wait(min(POLL_SECONDS, remaining))
                continue
            if removed:
                runs += left or 0
            tracker.update(completed=runs, total=runs or 1,
                           description=f"purged {name}: {runs} runs deleted")
            return removed, runs, calls


@handles_errors
@writes
def purge_slot(
    ctx: typer.Context,
    namespace: Annotated[str, typer.Option("--namespace", help="The slot's namespace.")],
    scope: Annotated[str, typer.Option("--scope", help="The slot's scope.")],
    key: Annotated[str, typer.Option("--key", help="The slot's key.")],
    until_done: Annotated[bool, typer.Option(
        "--until-done", help="Keep going (waiting when needed) until the slot is gone.")]
    = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", metavar="SECONDS", help="With --until-done, give up after this long.")]
    = 300.0,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Remove the slot with this exact identity and its settled run history.

    Exit 0 when it is removed (or was absent); exit 4 while work remains (more history, a
    running lease, unsettled history): the details say how to continue.
    """
    for option, value in (("--namespace", namespace), ("--scope", scope), ("--key", key)):
        if not value.strip():
            raise InvalidArgumentError(f"{option} is required: a non-empty string")
    if math.isnan(timeout):
        raise InvalidArgumentError("--timeout must be a number of seconds, got nan")
    db = open_database(ctx)
    name = _identity(namespace, scope, key)
    unless_yes(yes, f"Purge slot {name} and its run history?")
    details: dict[str, Any]
    try:
        if until_done:
            removed, runs, calls = _until_done(db, namespace, scope, key, max(timeout, 0.0))
            details = {"removed": removed, "runs_deleted": runs, "calls": calls}
        else:
            removed = engine_purge_slot(
                db, namespace=namespace, scope=scope, key=key, now=now(), actor=actor()
            )
            details = {"removed": removed, "calls": 1}
    except ConflictError:
        raise  # each call left its audit row, in its own transaction
    if as_json:
        output.emit_json({"namespace": namespace, "scope": scope, "key": key, **details})
    elif not removed:
        output.plain(f"no slot {name}: nothing to purge")
    elif until_done:
        output.plain(f"purged slot {name}: {details['runs_deleted']} runs deleted")
    else:
        output.plain(f"purged slot {name}")
