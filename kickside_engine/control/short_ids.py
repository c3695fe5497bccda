"""Short job ids: the last hex digits of a job's id, as the CLI's and dashboard's tables show
them, and their resolution back to the one job they name.

Job ids are UUIDv7: the leading digits are a timestamp that jobs enqueued together share, the
trailing ones random. The last :data:`SHORT_ID_LENGTH` hex digits tell jobs apart in practice;
a suffix that more than one job ends with is refused as ambiguous, naming them. Resolving a
suffix reads the job table's ids as text (no index serves a suffix), so it costs a scan: fine
for an operator's command, which is its only use.
"""

from __future__ import annotations

import re
import uuid

from sqlalchemy import Text, cast, select

from kickside_engine.errors import InvalidArgumentError, NotFoundError
from kickside_engine.ids import parse_uuid
from kickside_engine.store.database import Database

#: Hex digits a short id shows (the dashboard's and the CLI's tables).
SHORT_ID_LENGTH = 8
#: A suffix of a job id that :func:`resolve_job_id` takes: 8 to 12 hex digits (the last group).
_SUFFIX = re.compile(r"[0-9a-fA-F]{8,12}")
#: How many matches an ambiguity error names.
_SHOWN = 5


def short_id(job_id: uuid.UUID | str) -> str:
    """The last :data:`SHORT_ID_LENGTH` hex digits of a job id."""
    return str(job_id)[-SHORT_ID_LENGTH:]


def resolve_job_id(db: Database, text: str) -> uuid.UUID:
    """The job id ``text`` names: a full UUID as it is, or the one job whose id ends with
    ``text`` (8 to 12 hex digits, any case).

    A malformed id, or a suffix more than one job's id ends with, is an
    :class:`InvalidArgumentError` (the latter names the matches in ``details["matches"]``); a
    suffix no job's id ends with is a :class:`NotFoundError`. A full UUID is not looked up.
    """
    value = text.strip() if isinstance(text, str) else text
    parsed = parse_uuid(value)
    if parsed is not None:
        return parsed
    if not isinstance(value, str) or not _SUFFIX.fullmatch(value):
        raise InvalidArgumentError(
            f"job id {str(text)[:80]!r} is not a UUID, nor the last 8 to 12 hex digits of one"
        )
    suffix = value.lower()
    job = db.tables.job
    with db.read() as conn:
        found = list(
            conn.execute(
                select(job.c.id).where(cast(job.c.id, Text).like(f"%{suffix}")).limit(_SHOWN + 1)
            ).scalars()
        )
    if not found:
        raise NotFoundError(f"no job id ends with {suffix}")
    if len(found) > 1:
        shown = ", ".join(str(i) for i in found[:_SHOWN])
        more = " and more" if len(found) > _SHOWN else ""
        raise InvalidArgumentError(
            f"job id {suffix} is ambiguous: the ids {shown}{more} end with it; give more "
            "digits or the full id",
            details={"matches": [str(i) for i in found[:_SHOWN]]},
        )
    return uuid.UUID(str(found[0]))
