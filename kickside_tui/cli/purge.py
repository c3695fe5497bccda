"""`kickside purge-slot`: remove a retired slot and its settled run history.

By default one call of the engine's purge (at most 100 runs): a conflict exits 4 with its
details (how to continue). ``--until-done`` follows the continuation contract (the engine's
:func:`~kickside_engine.control.purge_runner.purge_until_done`): it calls again at once on
``needs_continue``, waits (polling, with a spinner) on ``wait_for``, and gives up with exit 4
when it would still be waiting ``--timeout`` seconds after it started. Output (``runs_deleted``)
counts the settled runs deleted: by the one call, or by all of them. Either way the command
leaves one audit row with its outcome.

The first call marks the slot as being purged and clears its pending wakes: it runs no more,
and the request shows in ``kickside slots``, ``job`` and ``explain`` until a later call finishes
the purge (or ``--withdraw`` takes it back).
"""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

import typer

from kickside_engine import ConflictError, Database, InvalidArgumentError
from kickside_engine.control import PurgeProgress, purge_until_done, withdraw_purge
from kickside_engine.control import purge_slot as engine_purge_slot
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


def _until_done(
    db: Database, namespace: str, scope: str, key: str, timeout_seconds: float
) -> tuple[int, int, int]:
    """Purge until the slot is gone; returns (removed, runs deleted, calls).

    A timeout is a :class:`ConflictError` (exit 4); Ctrl-C says that the purge stays pending.
    """
    name = _identity(namespace, scope, key)

    def pause(seconds: float) -> bool:
        wait(seconds)  # looked up at each call: tests replace the seam
        return False

    with output.progress(f"purging {name}") as tracker:

        def show(step: PurgeProgress) -> None:
            runs = step.runs_deleted
            if step.finished:
                tracker.update(
                    completed=runs,
                    total=runs or 1,
                    description=f"purged {name}: {runs} runs deleted",
                )
            elif step.wait_for:
                tracker.update(
                    completed=runs,
                    description=f"purging {name}: {runs} runs deleted, waiting for {step.wait_for}",
                )
            else:
                tracker.update(completed=runs, description=f"purging {name}: {runs} runs deleted")

        try:
            done = purge_until_done(
                db,
                namespace=namespace,
                scope=scope,
                key=key,
                actor=actor(),
                wait=pause,
                timeout_seconds=timeout_seconds,
                poll_seconds=POLL_SECONDS,
                clock=now,
                on_progress=show,
            )
        except KeyboardInterrupt:
            output.error(
                f"the purge of slot {name} is still pending (the slot runs no more): "
                "run purge-slot --until-done again to finish it, or --withdraw"
            )
            raise
    step = done.progress
    if done.outcome == "timed_out":
        wait_for = step.wait_for or "settlement"
        details: dict[str, Any] = {k: v for k, v in done.details.items() if k != "outcome"}
        raise ConflictError(
            f"slot {name}: still waiting for {wait_for} after {timeout_seconds:g}s "
            f"({step.runs_deleted} runs deleted); the purge stays pending: run purge-slot "
            "again later",
            details=details,
        )
    return int(step.removed), step.runs_deleted, step.calls


@handles_errors
@writes
def purge_slot(
    ctx: typer.Context,
    namespace: Annotated[str, typer.Option("--namespace", help="The slot's namespace.")],
    scope: Annotated[str, typer.Option("--scope", help="The slot's scope.")],
    key: Annotated[str, typer.Option("--key", help="The slot's key.")],
    until_done: Annotated[
        bool,
        typer.Option(
            "--until-done", help="Keep going (waiting when needed) until the slot is gone."
        ),
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", metavar="SECONDS", help="With --until-done, give up after this long."
        ),
    ] = 300.0,
    withdraw: Annotated[
        bool,
        typer.Option(
            "--withdraw", help="Take back a pending purge: the slot stays and can be woken again."
        ),
    ] = False,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Remove the slot with this exact identity and its settled run history.

    The slot's pending wakes are cleared at once and it runs no more. Exit 0 when it is removed
    (or was absent); exit 4 while work remains (more history, a running lease, unsettled
    history): the details say how to continue, and the purge shows as pending meanwhile.
    """
    for option, value in (("--namespace", namespace), ("--scope", scope), ("--key", key)):
        if not value.strip():
            raise InvalidArgumentError(f"{option} is required: a non-empty string")
    if math.isnan(timeout):
        raise InvalidArgumentError("--timeout must be a number of seconds, got nan")
    if withdraw and until_done:
        raise InvalidArgumentError("--withdraw takes a purge back: it cannot go --until-done")
    db = open_database(ctx)
    name = _identity(namespace, scope, key)
    if withdraw:
        withdrawn = withdraw_purge(
            db, namespace=namespace, scope=scope, key=key, now=now(), actor=actor()
        )
        if as_json:
            output.emit_json(
                {"namespace": namespace, "scope": scope, "key": key, "withdrawn": withdrawn}
            )
        else:
            output.plain(
                f"purge of slot {name} withdrawn"
                if withdrawn
                else f"no pending purge of slot {name}"
            )
        return
    unless_yes(yes, f"Purge slot {name} and its run history?")
    details: dict[str, Any]
    if until_done:
        removed, runs, calls = _until_done(db, namespace, scope, key, max(timeout, 0.0))
        details = {"removed": removed, "runs_deleted": runs, "calls": calls}
    else:
        # A conflict says how to continue; the call left its audit row either way.
        result = engine_purge_slot(
            db, namespace=namespace, scope=scope, key=key, now=now(), actor=actor()
        )
        removed = int(result)
        details = {"removed": removed, "runs_deleted": result.runs_deleted, "calls": 1}
    if as_json:
        output.emit_json({"namespace": namespace, "scope": scope, "key": key, **details})
    elif not removed:
        output.plain(f"no slot {name}: nothing to purge")
    else:
        output.plain(f"purged slot {name}: {details['runs_deleted']} runs deleted")
