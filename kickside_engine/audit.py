"""The audit trail: who did what to which job or queue, from which host, and when.

Every operator action writes one ``kickside_audit`` row through the connection of the change it
records, so the change and its audit row commit (or roll back) together. Details are redacted
before they are stored.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import enum
import getpass
import json
import socket
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select

from kickside_engine.clock import ensure_aware
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.redact import redact_text, redact_value
from kickside_engine.store.database import Database
from kickside_engine.store.notify import notify_in_transaction
from kickside_engine.text import require_storable_json, require_text

MAX_PAGE = 1000
_CURSOR_PREFIX = "a1:"

#: The actions Kickside's own operator API, CLI and dashboard record, by the name an operator
#: knows them by (the command's). Applications may record others with :func:`record_audit`.
ACTIONS = (
    "bulk_cancel",
    "bulk_discard",
    "bulk_retry",
    "cancel",
    "capacity_set",
    "delete",
    "disable",
    "discard",
    "enable",
    "enqueue",
    "park",
    "pause",
    "prune",
    "purge_slot",
    "purge_withdraw",
    "reload",
    "resume",
    "retry",
    "wake",
)


@dataclass(frozen=True)
class Actor:
    """Who performs an operator action: an OS or application user, and the host they act from."""

    user: str
    host: str

    def __post_init__(self) -> None:
        for name in ("user", "host"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip() or len(value) > 255:
                raise InvalidArgumentError(
                    f"actor {name} must be a non-empty string of at most 255 characters, "
                    f"got {value!r}"
                )
            require_text(value, f"actor {name}")

    @classmethod
    def current(cls) -> Actor:
        """The OS user running this process (``"unknown"`` if it has none) on this host."""
        try:
            user = getpass.getuser() or "unknown"
        except (KeyError, OSError):  # no login name and no passwd entry (some containers)
            user = "unknown"
        return cls(user=user, host=socket.gethostname() or "unknown")

    def __str__(self) -> str:
        return f"{self.user}@{self.host}"


@dataclass(frozen=True)
class AuditEntry:
    """A row of ``kickside_audit``."""

    id: int
    at: datetime
    actor: str
    host: str
    action: str
    target_type: str
    target: str
    details: dict[str, Any]


@dataclass(frozen=True)
class AuditPage:
    """Audit entries, newest first; pass ``next_cursor`` back for the next (older) page."""

    entries: list[AuditEntry]
    next_cursor: str | None


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _details_document(details: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(details, Mapping):
        raise InvalidArgumentError(f"audit details must be a mapping, got {type(details).__name__}")
    try:
        encoded = json.dumps(
            dict(details), default=_json_default, allow_nan=False, ensure_ascii=False
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgumentError(f"audit details cannot be stored as JSON: {exc}") from None
    require_storable_json(encoded, "audit details")
    document: dict[str, Any] = redact_value(json.loads(encoded))  # type: ignore[assignment]
    return document


def _bounded(value: str, field: str, max_length: int) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(f"audit {field} must be a non-empty string, got {value!r}")
    return require_text(value, f"audit {field}", max_length=max_length, allow_empty=True)


def record_audit(
    conn: Connection,
    db: Database,
    actor: Actor,
    action: str,
    target_type: str,
    target: str,
    details: Mapping[str, Any],
    now: datetime,
) -> AuditEntry:
    """Write one audit row through ``conn`` (the transaction of the change it records).

    ``details`` must be JSON-like (datetimes, UUIDs and enums are converted); it and ``target``
    are redacted before they are stored.
    """
    entry = AuditEntry(
        id=0,
        at=ensure_aware(now, "now"),
        actor=actor.user,
        host=actor.host,
        action=_bounded(action, "action", 64),
        target_type=_bounded(target_type, "target_type", 32),
        target=_bounded(redact_text(target), "target", 512),
        details=_details_document(details),
    )
    audit = db.tables.audit
    row = {k: v for k, v in dataclasses.asdict(entry).items() if k != "id"}
    new_id = conn.execute(insert(audit).values(**row).returning(audit.c.id)).scalar_one()
    # Dashboards listening on PostgreSQL refresh when the change commits (one per action).
    notify_in_transaction(conn, db, f"audit:{entry.action}")
    return dataclasses.replace(entry, id=new_id)


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
