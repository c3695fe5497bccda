"""The operator reads of jobs: filters and search, keyset paging, counts and job detail.

Listings stay fast on millions of rows: pages are keyset-paginated on ``(inserted_at DESC,
id DESC)`` with an opaque cursor (never OFFSET), and counts by queue and state are one GROUP BY
that ``ix_kickside_job_fetch (state, queue, ...)`` covers.

Search is a case-insensitive substring match over args and error messages, in which ``%``,
``_`` and ``\\`` match literally. Args are searched as their JSON text (``LOWER(CAST(args AS
text)) LIKE``), with the needle encoded the way JSON encodes a string value, so a needle with
quotes or backslashes finds the value and can never match JSON punctuation between values.
Error messages are searched element by element. Args and errors are stored redacted, so a
secret that was redacted cannot be found. On SQLite, case folding covers ASCII letters only.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Text,
    and_,
    cast,
    exists,
    func,
    literal,
    or_,
    select,
    true,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import JSONB

from kickside_engine.errors import InvalidArgumentError, NotFoundError
from kickside_engine.ids import require_uuid
from kickside_engine.models import Job, JobKind, JobState, Run
from kickside_engine.store.database import Database
from kickside_engine.store.rows import job_from_row, run_from_row

MAX_PAGE = 1000
MAX_SEARCH_LENGTH = 1000
_CURSOR_PREFIX = "j1:"


def _names(value: Iterable[str] | None, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        raise InvalidArgumentError(f"{field} must be a sequence of strings, not one string")
    names: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item or len(item) > 255 or "\x00" in item:
            raise InvalidArgumentError(f"{field} must hold non-empty strings, got {item!r}")
        if item not in names:
            names.append(item)
    return tuple(names)


def _enums(value: Any, kind: type[JobState] | type[JobKind], field: str) -> tuple[Any, ...]:
    if isinstance(value, str):
        raise InvalidArgumentError(f"{field} must be a sequence, not one string")
    members: list[Any] = []
    for item in value or ():
        try:
            member = kind(item)
        except ValueError:
            allowed = ", ".join(m.value for m in kind)
            raise InvalidArgumentError(
                f"unknown {field[:-1]} {item!r} in {field} ({allowed})"
            ) from None
        if member not in members:
            members.append(member)
    return tuple(members)


@dataclass(frozen=True)
class JobFilter:
    """Which jobs to list, count or act on; empty fields select everything.

    Within a field any value matches (states, queues, workers, kinds), except ``tags``: every
    tag given must be present. ``search`` is a case-insensitive literal substring of the args
    or of an error message. Strings are accepted for states and kinds.
    """

    states: tuple[JobState, ...] = ()
    queues: tuple[str, ...] = ()
    workers: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    kinds: tuple[JobKind, ...] = ()
    search: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "states", _enums(self.states, JobState, "states"))
        object.__setattr__(self, "kinds", _enums(self.kinds, JobKind, "kinds"))
        for field in ("queues", "workers", "tags"):
            object.__setattr__(self, field, _names(getattr(self, field), field))
        search = self.search
        if search is not None:
            if not isinstance(search, str):
                raise InvalidArgumentError(f"search must be a string, got {search!r}")
            if len(search) > MAX_SEARCH_LENGTH:
                raise InvalidArgumentError(f"search is longer than {MAX_SEARCH_LENGTH} characters")
            if "\x00" in search:
                raise InvalidArgumentError("search contains a NUL character")
            object.__setattr__(self, "search", search or None)

    def as_dict(self) -> dict[str, Any]:
        """The filter's non-empty fields as JSON-ready values (for audit rows and ``--json``)."""
        values: dict[str, Any] = {
            "states": [s.value for s in self.states],
            "queues": list(self.queues),
            "workers": list(self.workers),
            "tags": list(self.tags),
            "kinds": [k.value for k in self.kinds],
            "search": self.search,
        }
        return {k: v for k, v in values.items() if v}


@dataclass(frozen=True)
class JobPage:
    """One page of jobs, newest first; pass ``next_cursor`` back for the next (older) page."""

    jobs: list[Job]
    next_cursor: str | None


@dataclass(frozen=True)
class JobDetail:
    """A job with its run history (oldest run first); its errors are ``job.errors``."""

    job: Job
    runs: list[Run]


def like_pattern(needle: str) -> str:
    """A LIKE pattern (escape character ``\\``) matching ``needle`` literally anywhere."""
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _search_clause(db: Database, needle: str) -> ColumnElement[bool]:
    job = db.tables.job
    needle = needle.lower()
    # The JSON text of args escapes quotes, backslashes and control characters (SQLAlchemy's
    # serializer on SQLite also escapes non-ASCII; jsonb output does not).
    encoded = json.dumps(needle, ensure_ascii=db.is_sqlite)[1:-1]
    in_args = func.lower(cast(job.c.args, Text)).like(like_pattern(encoded), escape="\\")
    if db.is_postgresql:
        element = (
            func.jsonb_array_elements(job.c.errors).table_valued("value").render_derived()
        ).alias("e")
        message: ColumnElement[Any] = element.c.value.op("->>")("error")
    else:
        element = func.json_each(job.c.errors).table_valued("value").alias("e")
        message = func.json_extract(element.c.value, "$.error")
    in_errors = exists(
        select(literal(1))
        .select_from(element)
        .where(func.lower(message).like(like_pattern(needle), escape="\\"))
    )
    return or_(in_args, in_errors)


def _tags_clause(db: Database, tags: tuple[str, ...]) -> ColumnElement[bool]:
    job = db.tables.job
    if db.is_postgresql:
        # jsonb containment: served by the GIN index ix_kickside_job_tags.
        return type_coerce(job.c.tags, JSONB).contains(list(tags))
    clauses = []
    for tag in tags:
        each = func.json_each(job.c.tags).table_valued("value").alias("t")
        clauses.append(exists(select(literal(1)).select_from(each).where(each.c.value == tag)))
    return and_(*clauses)


def filter_clause(db: Database, flt: JobFilter) -> ColumnElement[bool]:
    """The WHERE clause selecting ``flt``'s jobs from ``db.tables.job``."""
    job = db.tables.job
    clauses: list[ColumnElement[bool]] = []
    if flt.states:
        clauses.append(job.c.state.in_([s.value for s in flt.states]))
    if flt.queues:
        clauses.append(job.c.queue.in_(flt.queues))
    if flt.workers:
        clauses.append(job.c.worker.in_(flt.workers))
    if flt.kinds:
        clauses.append(job.c.kind.in_([k.value for k in flt.kinds]))
    if flt.tags:
        clauses.append(_tags_clause(db, flt.tags))
    if flt.search:
        clauses.append(_search_clause(db, flt.search))
    return and_(*clauses) if clauses else true()


def _encode_cursor(job: Job) -> str:
    raw = f"{_CURSOR_PREFIX}{job.inserted_at.isoformat()}|{job.id.hex}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not raw.startswith(_CURSOR_PREFIX):
            raise ValueError(cursor)
        at, _, hex_id = raw[len(_CURSOR_PREFIX) :].partition("|")
        inserted_at = datetime.fromisoformat(at)
        if inserted_at.tzinfo is None:
            raise ValueError(cursor)
        return inserted_at, uuid.UUID(hex=hex_id)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidArgumentError(f"cursor {cursor[:80]!r} is not a job listing cursor") from None


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgumentError(f"limit must be 1..{MAX_PAGE}, got {limit!r}")
    return limit


def list_jobs(
    db: Database, flt: JobFilter | None = None, *, limit: int = 50, cursor: str | None = None
) -> JobPage:
    """One page of the jobs matching ``flt``, newest first (``inserted_at``, then id).

    Keyset pagination: a job is on exactly one page even while rows are added, and a page
    costs the same however deep it is. ``next_cursor`` is None on the last page.
    """
    _check_limit(limit)
    job = db.tables.job
    stmt = (
        select(job)
        .where(filter_clause(db, flt or JobFilter()))
        .order_by(job.c.inserted_at.desc(), job.c.id.desc())
        .limit(limit + 1)
    )
    if cursor is not None:
        at, last_id = _decode_cursor(cursor)
        stmt = stmt.where(
            or_(job.c.inserted_at < at, and_(job.c.inserted_at == at, job.c.id < last_id))
        )
    with db.read() as conn:
        jobs = [job_from_row(r) for r in conn.execute(stmt)]
    more = len(jobs) > limit
    jobs = jobs[:limit]
    return JobPage(jobs, _encode_cursor(jobs[-1]) if more else None)


def count_jobs(db: Database, flt: JobFilter | None = None) -> int:
    """How many jobs match ``flt``."""
    job = db.tables.job
    stmt = select(func.count()).select_from(job).where(filter_clause(db, flt or JobFilter()))
    with db.read() as conn:
        return int(conn.execute(stmt).scalar_one())


def zero_counts() -> dict[JobState, int]:
    return dict.fromkeys(JobState, 0)


def read_state_counts(
    conn: Connection, db: Database, queue: str | None = None
) -> dict[str, dict[JobState, int]]:
    job = db.tables.job
    stmt = select(job.c.queue, job.c.state, func.count()).group_by(job.c.queue, job.c.state)
    if queue is not None:
        stmt = stmt.where(job.c.queue == queue)
    counts: dict[str, dict[JobState, int]] = {}
    for name, state, count in conn.execute(stmt):
        counts.setdefault(name, zero_counts())[JobState(state)] = int(count)
    return counts


def state_counts(db: Database) -> dict[str, dict[JobState, int]]:
    """Jobs per queue and state (every state present, zero when none), for the overview."""
    with db.read() as conn:
        return read_state_counts(conn, db)


def parse_job_id(job_id: uuid.UUID | str) -> uuid.UUID:
    """A job id as a UUID; a malformed one is an :class:`InvalidArgumentError`."""
    return require_uuid(job_id, "job id")


def read_runs(conn: Connection, db: Database, job_id: uuid.UUID) -> list[Run]:
    """A job's runs, oldest first, through ``conn``."""
    run = db.tables.job_run
    rows = conn.execute(select(run).where(run.c.job_id == job_id).order_by(run.c.id))
    return [run_from_row(r) for r in rows]


def job_detail(db: Database, job_id: uuid.UUID | str) -> JobDetail:
    """A job with its errors and runs.

    An absent job is a :class:`NotFoundError`, a malformed id an :class:`InvalidArgumentError`.
    """
    parsed = parse_job_id(job_id)
    job = db.tables.job
    with db.read() as conn:
        row = conn.execute(select(job).where(job.c.id == parsed)).one_or_none()
        if row is None:
            raise NotFoundError(f"job {parsed} not found")
        return JobDetail(job_from_row(row), read_runs(conn, db, parsed))
