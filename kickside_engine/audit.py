"""Writing the audit trail: who did what to which job or queue, from which host, and when.

Every operator action writes one ``kickside_audit`` row through the connection of the change it
records, so the change and its audit row commit (or roll back) together. Details are redacted
before they are stored. Reading the trail is the operator API's
(:mod:`kickside_engine.control.audit`).
"""

from __future__ import annotations

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

from sqlalchemy import Connection

from kickside_engine.clock import ensure_aware
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.redact import redact_text, redact_value
from kickside_engine.store.audit import insert_audit_row
from kickside_engine.store.database import Database
from kickside_engine.text import require_storable_json, require_text

#: The actions Kickside's own operator API, CLI and dashboard record, by the name an operator
#: knows them by (the command's). Applications may record others with :func:`record_audit`.
ACTIONS = (
    "bulk_cancel",
    "bulk_discard",
    "bulk_retry",
    "cancel",
    "cancel_workflow",
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
    "retry_workflow",
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
    db: Database,
    conn: Connection,
    actor: Actor,
    action: str,
    target_type: str,
    target: str,
    details: Mapping[str, Any],
    now: datetime,
) -> AuditEntry:
    """Write one audit row through ``conn`` (the transaction of the change it records).

    ``details`` must be JSON-like (datetimes, UUIDs and enums are converted); it and ``target``
    are redacted before they are stored. The database comes first, as everywhere; the order
    this took before, ``(conn, db, ...)``, is refused with an :class:`InvalidArgumentError`
    rather than failing deeper down.
    """
    if isinstance(db, Connection):
        raise InvalidArgumentError("call record_audit(db, conn, ...): the database comes first")
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
    row = {k: v for k, v in dataclasses.asdict(entry).items() if k != "id"}
    return dataclasses.replace(entry, id=insert_audit_row(db, conn, row))
