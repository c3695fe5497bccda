"""Reading the audit trail: entries newest first, a page at a time, and the known actions."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from sqlalchemy import select

from kickside_engine.audit import ACTIONS, AuditEntry
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.store.database import Database
from kickside_engine.text import require_text

MAX_PAGE = 1000
_CURSOR_PREFIX = "a1:"


@dataclass(frozen=True)
class AuditPage:
    """Audit entries, newest first; pass ``next_cursor`` back for the next (older) page."""

    entries: list[AuditEntry]
    next_cursor: str | None


def _encode_cursor(entry_id: int) -> str:
    raw = f"{_CURSOR_PREFIX}{entry_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not raw.startswith(_CURSOR_PREFIX):
            raise ValueError(cursor)
        return int(raw[len(_CURSOR_PREFIX) :])
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgumentError(f"cursor {cursor[:80]!r} is not an audit cursor") from None


def check_audit_action(db: Database, action: str) -> str:
    """``action`` if it names an action that can be in the trail, else
    :class:`InvalidArgumentError` listing them: one of :data:`ACTIONS`, or one already recorded
    (an application's own)."""
    require_text(action, "action", max_length=64, allow_empty=True)
    if action in ACTIONS:
        return action
    audit = db.tables.audit
    with db.read() as conn:
        recorded = set(conn.execute(select(audit.c.action).distinct()).scalars())
    if action in recorded:
        return action
    known = sorted(set(ACTIONS) | recorded)
    raise InvalidArgumentError(
        f"unknown audit action {action[:64]!r}: known actions are {', '.join(known)}",
        details={"action": action[:64], "known": known},
    )


def list_audit(
    db: Database,
    *,
    limit: int = 100,
    cursor: str | None = None,
    action: str | None = None,
    target: str | None = None,
) -> AuditPage:
    """Audit entries, newest first, optionally only one ``action`` or one ``target``.

    Pages by keyset on the entry id; ``next_cursor`` is None on the last page.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgumentError(f"limit must be 1..{MAX_PAGE}, got {limit!r}")
    audit = db.tables.audit
    stmt = select(audit).order_by(audit.c.id.desc()).limit(limit + 1)
    if cursor is not None:
        stmt = stmt.where(audit.c.id < _decode_cursor(cursor))
    if action is not None:
        stmt = stmt.where(audit.c.action == require_text(action, "action", allow_empty=True))
    if target is not None:
        target = require_text(target, "target", max_length=None, allow_empty=True)
        stmt = stmt.where(audit.c.target == target)
    with db.read() as conn:
        rows = conn.execute(stmt).all()
    entries = [
        AuditEntry(
            id=r.id,
            at=r.at,
            actor=r.actor,
            host=r.host,
            action=r.action,
            target_type=r.target_type,
            target=r.target,
            details=dict(r.details or {}),
        )
        for r in rows[:limit]
    ]
    more = len(rows) > limit
    return AuditPage(entries, _encode_cursor(entries[-1].id) if more else None)
