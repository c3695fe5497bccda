"""`kickside purge-slot`: remove a retired slot and its settled run history.

By default one call of the engine's purge (at most 100 runs): a conflict exits 4 with its
details (how to continue). ``--until-done`` follows the continuation contract itself: it calls
again at once on ``needs_continue``, waits (polling, with a spinner) on ``wait_for``, and gives
up with exit 4 when it would still be waiting ``--timeout`` seconds after it started. Output
(``runs_deleted``) counts the settled runs deleted: by the one call, or by all of them.
"""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

import typer

from kickside_engine import ConflictError, Database, InvalidArgumentError
from kickside_engine.purge import purge_slot as engine_purge_slot
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.options import JsonOption, YesOption

#: How often --until-done looks again while the slot waits for a lease or a settlement.
POLL_SECONDS = 0.5


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


def _until_done(
    db: Database, namespace: str, scope: str, key: str, timeout: float
) -> tuple[int, int, int]:
    """Purge until the slot is gone; returns (removed, runs deleted, calls).

    Every call reports the settled runs it deleted: a pending one in its conflict's details,
    the final one in its :class:`~kickside_engine.purge.PurgeResult`.
    """
    deadline = time.monotonic() + timeout
    name = _identity(namespace, scope, key)
    runs = calls = 0
    with output.progress(f"purging {name}") as tracker:
        while True:
            calls += 1
            try:
                result = engine_purge_slot(
                    db, namespace=namespace, scope=scope, key=key, now=now(), actor=actor()
                )
            except ConflictError as exc:
                details = _continuation(exc)
                runs += int(details.get("runs_deleted", 0))
                tracker.update(completed=runs, description=f"purging {name}: {runs} runs deleted")
                if details.get("needs_continue"):
                    continue
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
            runs += result.runs_deleted
            tracker.update(completed=runs, total=runs or 1,
                           description=f"purged {name}: {runs} runs deleted")
            return int(result), runs, calls


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
            result = engine_purge_slot(
                db, namespace=namespace, scope=scope, key=key, now=now(), actor=actor()
            )
            removed = int(result)
            details = {"removed": removed, "runs_deleted": result.runs_deleted, "calls": 1}
    except ConflictError:
        raise  # each call left its audit row, in its own transaction
    if as_json:
        output.emit_json({"namespace": namespace, "scope": scope, "key": key, **details})
    elif not removed:
        output.plain(f"no slot {name}: nothing to purge")
    else:
        output.plain(f"purged slot {name}: {details['runs_deleted']} runs deleted")
