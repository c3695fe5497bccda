"""Running a slot purge to its end: the continuation contract followed for one command.

:func:`purge_until_done` calls :func:`kickside_engine.purge.purge_slot` again at once while
settled history remains and, while the slot runs or its history settles, after the caller's
``wait``; the CLI's ``purge-slot --until-done`` and the dashboard's purge dialog both use it.
However the command ends, it leaves one ``purge_slot`` audit row with its outcome (the calls
themselves are not audited one by one: an operator waiting on a long run once wrote 70).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kickside_engine.audit import Actor, record_audit
from kickside_engine.clock import utcnow
from kickside_engine.errors import ConflictError
from kickside_engine.purge import identity_of, purge_slot
from kickside_engine.store.database import Database


@dataclass(frozen=True)
class PurgeProgress:
    """Where a purge run by :func:`purge_until_done` stands after a call.

    ``runs_deleted`` and ``calls`` add up every call so far; ``wait_for`` names what the
    purge waits for (None when it goes on at once or is finished).
    """

    calls: int
    runs_deleted: int
    removed: bool = False
    absent: bool = False
    needs_continue: bool = False
    wait_for: str | None = None
    message: str = ""

    @property
    def finished(self) -> bool:
        """True when the slot is gone (removed by this purge, or already absent)."""
        return self.removed or self.absent


@dataclass(frozen=True)
class PurgeOutcome:
    """How a purge command ended: ``outcome`` is ``removed``, ``absent``, ``timed_out``,
    ``stopped`` (the caller's ``wait`` said stop), ``interrupted`` or ``failed``."""

    outcome: str
    progress: PurgeProgress
    details: dict[str, Any]


def purge_until_done(
    db: Database,
    *,
    namespace: str,
    scope: str,
    key: str,
    actor: Actor,
    wait: Callable[[float], bool],
    timeout_seconds: float | None = None,
    poll_seconds: float = 0.5,
    clock: Callable[[], datetime] = utcnow,
    on_progress: Callable[[PurgeProgress], None] | None = None,
) -> PurgeOutcome:
    """Purge the slot to its end, following the continuation contract, with one audit row.

    Calls again at once on ``needs_continue``; on ``wait_for`` calls ``wait(seconds)`` first
    (it returns True to stop: ``stopped``), up to ``timeout_seconds`` after the start
    (``timed_out``; None: no limit). ``on_progress`` sees every call. However it ends (also
    by an exception, recorded as ``interrupted`` or ``failed`` and raised again), one
    ``purge_slot`` audit row records the command: its outcome, calls and runs deleted.
    """
    identity = identity_of(namespace, scope, key)
    deadline = None if timeout_seconds is None else time.monotonic() + max(timeout_seconds, 0.0)
    progress = PurgeProgress(0, 0)
    outcome = "failed"
    try:
        while True:
            progress = _one_call(db, identity, actor, clock(), progress)
            if on_progress is not None:
                on_progress(progress)
            if progress.finished:
                outcome = "removed" if progress.removed else "absent"
                break
            if progress.needs_continue:
                continue
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                outcome = "timed_out"
                break
            pause = poll_seconds if remaining is None else min(poll_seconds, remaining)
            if wait(pause):
                outcome = "stopped"
                break
    except KeyboardInterrupt:
        outcome = "interrupted"
        raise
    finally:
        details = _command_details(outcome, progress, timeout_seconds)
        _audit_command(db, identity, actor, details, clock(), quiet=outcome in _RAISED)
    return PurgeOutcome(outcome, progress, details)


_RAISED = frozenset({"interrupted", "failed"})


def _one_call(
    db: Database,
    identity: tuple[str, str, str],
    actor: Actor,
    now: datetime,
    before: PurgeProgress,
) -> PurgeProgress:
    calls = before.calls + 1
    try:
        result = purge_slot(
            db,
            namespace=identity[0],
            scope=identity[1],
            key=identity[2],
            now=now,
            actor=actor,
            audit=False,
        )
    except ConflictError as exc:
        if not exc.details.get("cleanup_pending"):
            raise
        return PurgeProgress(
            calls,
            before.runs_deleted + int(exc.details.get("runs_deleted", 0)),
            needs_continue=bool(exc.details.get("needs_continue")),
            wait_for=exc.details.get("wait_for"),
            message=str(exc),
        )
    name = "/".join(identity)
    if result.removed:
        return PurgeProgress(
            calls,
            before.runs_deleted + result.runs_deleted,
            removed=True,
            message=f"slot {name} removed",
        )
    return PurgeProgress(
        calls, before.runs_deleted, absent=True, message=f"no slot {name} (already gone)"
    )


def _command_details(
    outcome: str, progress: PurgeProgress, timeout_seconds: float | None
) -> dict[str, Any]:
    details: dict[str, Any] = {
        "outcome": outcome,
        "removed": int(progress.removed),
        "runs_deleted": progress.runs_deleted,
        "calls": progress.calls,
        "until_done": True,
    }
    if not progress.finished:
        details["cleanup_pending"] = True
        if progress.wait_for:
            details["wait_for"] = progress.wait_for
    if outcome == "timed_out":
        details["timed_out"] = True
        details["timeout_seconds"] = timeout_seconds
    return details


def _audit_command(
    db: Database,
    identity: tuple[str, str, str],
    actor: Actor,
    details: dict[str, Any],
    now: datetime,
    *,
    quiet: bool,
) -> None:
    """The command's one audit row; ``quiet`` when an exception is on its way already (a
    database that failed the purge likely fails this too, and must not hide why)."""
    try:
        with db.begin() as conn:
            record_audit(db, conn, actor, "purge_slot", "slot", "/".join(identity), details, now)
    except Exception:
        if not quiet:
            raise
