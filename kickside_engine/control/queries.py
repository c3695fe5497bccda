"""The operator reads of jobs: filters and search, keyset paging, counts and job detail.

Listings stay fast on millions of rows: pages are keyset-paginated on ``(inserted_at DESC,
id DESC)`` with an opaque cursor (never OFFSET), and a count can stop at a limit. Counts by
queue and state live in :mod:`kickside_engine.control.counts`; a search that no index serves
is read in bounded windows by :mod:`kickside_engine.control.search`.

Search is a case-insensitive substring match over args and error messages, in which ``%``,
``_``, ``\\`` and quotes match literally. In args it looks at each key and each scalar value
(strings as their text, numbers and booleans as JSON writes them), never at the JSON
punctuation or escapes between them. A cheap ``LOWER(CAST(args AS text)) LIKE`` on the args'
JSON text (with the needle encoded the way JSON encodes a string) selects the candidates
first; the exact test on the keys and values then runs on those only. Error messages are
searched element by element. On SQLite, case folding covers ASCII letters only.

Search sees what the operator is shown, never more: errors are stored redacted, and args,
stored as given, are searched as redacted (:mod:`kickside_engine.redact`). A job whose args
redaction changes carries their redacted copy in ``meta["redacted_args"]`` (written at
enqueue, with the sensitive names its worker declares), and the search reads that copy instead
of the args, so a secret never finds its job (nor does the readable text around it leak it by
matching), while a host or an order id still does. Jobs whose args need no redaction (nearly
all: args hold ids) carry no copy and are searched in their args.
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
    case,
    cast,
    exists,
    func,
    literal,
    literal_column,
    or_,
    select,
    true,
    type_coerce,
)
from sqlalchemy.dialects.postgresql import JSONB

from kickside_engine.errors import InvalidArgumentError, NotFoundError
from kickside_engine.ids import require_uuid
from kickside_engine.models import Job, JobKind, JobState, Run
from kickside_engine.redact import REDACTED_ARGS_META
from kickside_engine.store.database import Database
from kickside_engine.store.rows import job_from_row, run_from_row
from kickside_engine.store.tables import state_literal
from kickside_engine.text import require_text

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
        if not isinstance(item, str) or not item or len(item) > 255:
            raise InvalidArgumentError(f"{field} must hold non-empty strings, got {item!r}")
        require_text(item, field, allow_empty=True)
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
    or of an error message, as they are shown (redacted: a secret finds nothing). Strings are
    accepted for states and kinds.
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
            require_text(search, "search", max_length=None, allow_empty=True)
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


def _shown_args(db: Database) -> ColumnElement[Any]:
    """The args as search reads them: their redacted copy when enqueue stored one, else the
    args themselves (which redaction leaves unchanged)."""
    job = db.tables.job
    copy: ColumnElement[Any]
    if db.is_postgresql:
        copy = type_coerce(job.c.meta, JSONB).op("->")(literal_column(f"'{REDACTED_ARGS_META}'"))
    else:
        copy = func.json_extract(job.c.meta, f"$.{REDACTED_ARGS_META}")
    return func.coalesce(copy, job.c.args)


def _search_clause(db: Database, needle: str) -> ColumnElement[bool]:
    job = db.tables.job
    needle = needle.lower()
    args = _shown_args(db)
    # The JSON text of args escapes quotes, backslashes and control characters (SQLAlchemy's
    # serializer on SQLite also escapes non-ASCII, SQLite's json_extract and jsonb output do
    # not: on SQLite, where a redacted copy comes from json_extract, both forms are tried).
    encodings = {json.dumps(needle, ensure_ascii=False)[1:-1]}
    if db.is_sqlite:
        encodings.add(json.dumps(needle)[1:-1])
    # Every job whose args hold the needle passes this filter; a few more may (an escape such
    # as "\\n" holds an "n"), and the exact test on keys and values removes them.
    text = func.lower(cast(args, Text))
    in_json = or_(*(text.like(like_pattern(e), escape="\\") for e in sorted(encodings)))
    in_args = and_(in_json, _args_hold(db, args, like_pattern(needle)))
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


# Each scalar of the args (not objects or arrays), and each key of every object.
_PG_SCALARS: ColumnElement[Any] = literal_column(
    """'strict $.** ? (@.type() != "object" && @.type() != "array")'::jsonpath"""
)
_PG_KEYS: ColumnElement[Any] = literal_column(
    """'strict $.** ? (@.type() == "object").keyvalue().key'::jsonpath"""
)


def _args_hold(db: Database, args: ColumnElement[Any], pattern: str) -> ColumnElement[bool]:
    """Whether a key or a scalar value of ``args`` matches ``pattern`` (lowercase LIKE)."""
    if db.is_postgresql:
        found = []
        for name, path in (("v", _PG_SCALARS), ("k", _PG_KEYS)):
            item = func.jsonb_path_query(args, path).table_valued("value")
            item = item.render_derived().alias(name)
            text_of = item.c.value.op("#>>")(literal_column("'{}'"))
            found.append(
                exists(
                    select(literal(1))
                    .select_from(item)
                    .where(func.lower(text_of).like(pattern, escape="\\"))
                )
            )
        return or_(*found)
    node = func.json_tree(args).table_valued("key", "atom", "type").alias("t")
    scalar = case(
        (node.c.type.in_(("true", "false")), node.c.type),
        (node.c.type.in_(("text", "integer", "real")), cast(node.c.atom, Text)),
        else_=None,
    )
    key = case((func.typeof(node.c.key) == "text", node.c.key), else_=None)
    return exists(
        select(literal(1))
        .select_from(node)
        .where(
            or_(
                func.lower(scalar).like(pattern, escape="\\"),
                func.lower(key).like(pattern, escape="\\"),
            )
        )
    )


def _tags_clause(db: Database, tags: tuple[str, ...]) -> ColumnElement[bool]:
    job = db.tables.job
    if db.is_postgresql:
        # jsonb containment, served by the GIN index ix_kickside_job_tags. That index is partial
        # (tagged jobs only), and the planner uses it only where the query implies its predicate:
        # hence the redundant ``tags <> '[]'``, as a literal (a generic plan of a prepared
        # statement could not prove it from a parameter).
        document = type_coerce(job.c.tags, JSONB)
        return and_(document.contains(list(tags)), document != literal_column("'[]'::jsonb"))
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
        clauses.append(job.c.state.in_([state_literal(s) for s in flt.states]))
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


def older_than(db: Database, cursor: str) -> ColumnElement[bool]:
    """The jobs after ``cursor`` in listing order (older, or as old with a smaller id)."""
    job = db.tables.job
    at, last_id = _decode_cursor(cursor)
    # The redundant ``inserted_at <= at`` is what lets an index scan start at the cursor
    # instead of filtering every newer job out.
    return and_(
        job.c.inserted_at <= at,
        or_(job.c.inserted_at < at, and_(job.c.inserted_at == at, job.c.id < last_id)),
    )


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
        stmt = stmt.where(older_than(db, cursor))
    with db.read() as conn:
        jobs = [job_from_row(r) for r in conn.execute(stmt)]
    more = len(jobs) > limit
    jobs = jobs[:limit]
    return JobPage(jobs, _encode_cursor(jobs[-1]) if more else None)


def count_jobs(db: Database, flt: JobFilter | None = None, *, limit: int | None = None) -> int:
    """How many jobs match ``flt``; with ``limit``, counting stops there (``min(count, limit)``).

    A limit keeps a count of millions of jobs cheap: the dashboard shows ``limit+`` instead.
    """
    job = db.tables.job
    where = filter_clause(db, flt or JobFilter())
    if limit is None:
        stmt = select(func.count()).select_from(job).where(where)
    else:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgumentError(f"limit must be a whole number >= 1, got {limit!r}")
        matching = select(literal(1)).select_from(job).where(where).limit(limit).subquery()
        stmt = select(func.count()).select_from(matching)
    with db.read() as conn:
        return int(conn.execute(stmt).scalar_one())


def parse_job_id(job_id: uuid.UUID | str) -> uuid.UUID:
    """A job id as a UUID; a malformed one is an :class:`InvalidArgumentError`."""
    return require_uuid(job_id, "job id")


def read_runs(db: Database, conn: Connection, job_id: uuid.UUID) -> list[Run]:
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
        return JobDetail(job_from_row(row), read_runs(db, conn, parsed))
