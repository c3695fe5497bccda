"""Enqueueing: the job builder, single inserts with uniqueness, and batch inserts.

A job is written through the caller's connection, so it commits (or rolls back) with the
caller's own data::

    with db.begin() as conn:
        conn.execute(insert(orders).values(...))
        deliver_email.new({"order_id": 42}).queue("mailers").insert(db, conn=conn)

Args must be a JSON object, and are stored and delivered exactly as given: args that JSON
cannot hold as they are (a cycle, a set, a non-string key, NaN) are refused with the place and
the reason, never rewritten. Args hold ids, not secrets; still, wherever they are shown, logged
or searched they are redacted (:mod:`kickside_engine.redact`). For that, enqueue records in the
job's meta the sensitive key names its worker, registry or builder declares
(``meta["sensitive_keys"]``) and, when redaction changes the args, their redacted copy
(``meta["redacted_args"]``), which is what a search reads. Timestamps come from the application
clock in UTC.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, String, bindparam, func, insert, select

from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import ConflictError, InvalidArgumentError
from kickside_engine.ids import uuid7
from kickside_engine.models import JOB_STATES_BY_VALUE, Inserted, JobKind, JobState
from kickside_engine.redact import REDACTED_ARGS_META, SENSITIVE_KEYS_META, redact_value
from kickside_engine.store.copy_text import copy_text, encode_json, escape
from kickside_engine.store.database import Database
from kickside_engine.store.notify import channel_name, local_signal, notify_in_transaction
from kickside_engine.store.tables import Tables
from kickside_engine.text import require_storable_json, require_text
from kickside_engine.uniqueness import Unique
from kickside_engine.workers import (
    CapacityDeclaration,
    WorkerSpec,
    sensitive_key_names,
    validate_name,
)

MAX_ATTEMPTS_LIMIT = 10_000
MAX_TAGS = 64
MAX_ARGS_BYTES = 1_000_000


@dataclass(frozen=True)
class JobOptions:
    """Everything a builder will write; validated when the job is inserted."""

    worker: str
    args: dict[str, Any]
    queue: str = "default"
    priority: int = 0
    scheduled_at: datetime | None = None
    schedule_in: timedelta | None = None
    max_attempts: int = 20
    tags: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)
    unique: Unique | None = None
    max_execution_ms: int | None = None
    concurrency_key: str | None = None
    namespace: str | None = None
    scope: str | None = None
    identity_key: str | None = None
    kind: JobKind = JobKind.ONESHOT
    demand: bool = False
    capacity: CapacityDeclaration | None = None
    sensitive_keys: frozenset[str] = frozenset()


class JobBuilder:
    """An immutable description of a job to insert; each method returns a new builder."""

    __slots__ = ("options",)

    def __init__(self, worker: str, args: Any = None, **options: Any) -> None:
        self.options = JobOptions(worker=worker, args=_args_dict(args), **options)

    @classmethod
    def for_worker(cls, spec: WorkerSpec, args: Any = None) -> JobBuilder:
        """A builder carrying a declared worker's defaults."""
        return cls(
            spec.name,
            args,
            queue=spec.queue,
            priority=spec.priority,
            max_attempts=spec.max_attempts,
            unique=spec.unique,
            tags=spec.tags,
            max_execution_ms=int(spec.timeout / timedelta(milliseconds=1)),
            capacity=spec.capacity,
            sensitive_keys=spec.sensitive_keys,
        )

    def _with(self, **changes: Any) -> JobBuilder:
        new = JobBuilder.__new__(JobBuilder)
        new.options = replace(self.options, **changes)
        return new

    def queue(self, name: str) -> JobBuilder:
        """Run on queue ``name`` instead of the worker's."""
        return self._with(queue=name)

    def priority(self, value: int) -> JobBuilder:
        """0 is the highest priority, 9 the lowest; values outside are clamped into 0..9."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidArgumentError(f"priority must be an integer, got {value!r}")
        return self._with(priority=min(9, max(0, value)))

    def schedule_in(self, delay: timedelta) -> JobBuilder:
        """Make the job runnable ``delay`` from the time of insert."""
        if not isinstance(delay, timedelta):
            raise InvalidArgumentError(f"schedule_in takes a timedelta, got {delay!r}")
        return self._with(schedule_in=delay, scheduled_at=None)

    def schedule_at(self, when: datetime) -> JobBuilder:
        """Make the job runnable at ``when`` (timezone-aware)."""
        return self._with(scheduled_at=ensure_aware(when, "schedule_at"), schedule_in=None)

    def max_attempts(self, value: int) -> JobBuilder:
        """How many attempts before the job is discarded (at least 1)."""
        return self._with(max_attempts=_max_attempts(value))

    def tags(self, tags: Iterable[str]) -> JobBuilder:
        """Replace the tags."""
        if isinstance(tags, str) or not isinstance(tags, Iterable):
            raise InvalidArgumentError(f"tags must be a list of strings, got {tags!r}")
        return self._with(tags=tuple(tags))

    def tag(self, tag: str) -> JobBuilder:
        """Append one tag."""
        return self._with(tags=(*self.options.tags, tag))

    def meta(self, meta: Mapping[str, Any]) -> JobBuilder:
        """Merge ``meta`` into the job's meta."""
        if not isinstance(meta, Mapping):
            raise InvalidArgumentError(f"meta must be a JSON object, got {type(meta).__name__}")
        return self._with(meta={**self.options.meta, **meta})

    def sensitive_keys(self, keys: Iterable[str]) -> JobBuilder:
        """Add key names to redact wherever this job's args are shown (beyond the built-in
        ones and the worker's); useful when enqueueing by worker name."""
        names = sensitive_key_names(keys)
        return self._with(sensitive_keys=self.options.sensitive_keys | names)

    def unique(self, rule: Unique | None) -> JobBuilder:
        """Apply a uniqueness rule (None removes the worker's default)."""
        if rule is not None and not isinstance(rule, Unique):
            raise InvalidArgumentError(f"unique takes a Unique rule or None, got {rule!r}")
        return self._with(unique=rule)

    def max_execution(self, limit: timedelta) -> JobBuilder:
        """Terminate an attempt running longer than ``limit``."""
        if not isinstance(limit, timedelta):
            raise InvalidArgumentError(f"max_execution takes a timedelta, got {limit!r}")
        ms = int(limit / timedelta(milliseconds=1))
        if ms <= 0:
            raise InvalidArgumentError(f"max_execution must be positive, got {limit}")
        return self._with(max_execution_ms=ms)

    def concurrency_key(self, key: str | None) -> JobBuilder:
        """Share single-flight (or a capacity group's per-key limit) with jobs of this key."""
        return self._with(concurrency_key=key)

    def slot(self, namespace: str, scope: str, key: str, *, demand: bool = False) -> JobBuilder:
        """Make this a slot job with a durable identity; ``demand`` asks it to run."""
        return self._with(
            kind=JobKind.SLOT, namespace=namespace, scope=scope, identity_key=key, demand=demand
        )

    def identity(self, namespace: str, scope: str, key: str) -> JobBuilder:
        """Give a one-shot job an identity (at most one active job per identity)."""
        return self._with(namespace=namespace, scope=scope, identity_key=key)

    def insert(
        self, db: Database, *, conn: Connection | None = None, now: datetime | None = None
    ) -> Inserted:
        """Insert the job (see :func:`enqueue`)."""
        return enqueue(db, self, conn=conn, now=now)

    def __repr__(self) -> str:
        return f"JobBuilder({self.options.worker!r}, queue={self.options.queue!r})"


def _args_dict(args: Any) -> dict[str, Any]:
    if args is None:
        return {}
    if type(args) is dict:
        return dict(args)
    if dataclasses.is_dataclass(args) and not isinstance(args, type):
        return dataclasses.asdict(args)
    if isinstance(args, Mapping):
        return dict(args)
    raise InvalidArgumentError(
        f"args must be a JSON object (a dict or a dataclass), got {type(args).__name__}"
    )


def _max_attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"max_attempts must be an integer, got {value!r}")
    if not 1 <= value <= MAX_ATTEMPTS_LIMIT:
        raise InvalidArgumentError(f"max_attempts must be 1..{MAX_ATTEMPTS_LIMIT}, got {value}")
    return value


def _json_object(value: Mapping[str, Any], field_name: str) -> dict[str, Any]:
    """``value`` as stored: JSON that decodes to exactly ``value`` (lists for tuples), or an
    :class:`InvalidArgumentError` that says what in it JSON cannot hold, and where."""
    try:
        encoded = encode_json(value)
    except (TypeError, ValueError, RecursionError) as exc:
        problem = _json_problem(value, field_name)
        if problem is None and isinstance(exc, RecursionError):
            problem = "they are nested too deeply"
        raise InvalidArgumentError(
            f"{field_name} cannot be stored as JSON: {problem or exc}"
        ) from None
    require_storable_json(encoded, field_name)
    if len(encoded.encode()) > MAX_ARGS_BYTES:
        raise InvalidArgumentError(f"{field_name} exceed {MAX_ARGS_BYTES} bytes as JSON")
    try:
        decoded: dict[str, Any] = json.loads(encoded)
    except RecursionError:
        raise InvalidArgumentError(f"{field_name} are nested too deeply") from None
    # JSON writes a key 1 as "1" and a tuple as a list: the first would silently change the
    # data the worker gets, so it is refused; lists for tuples are what JSON has.
    if decoded != value:
        problem = _json_problem(value, field_name)
        if problem is not None:
            raise InvalidArgumentError(f"{field_name} cannot be stored as JSON: {problem}")
    return decoded


def _json_problem(value: Any, field_name: str) -> str | None:
    """What in ``value`` JSON cannot store as it is (with its place, e.g. ``args['a'][0]``),
    or None: a cycle, a key that is not a string, a value that is not JSON, NaN or infinity.
    Walks with an explicit stack, each container once."""
    stack: list[tuple[Any, str, bool]] = [(value, field_name, False)]
    on_path: set[int] = set()
    checked: set[int] = set()
    while stack:
        item, place, leaving = stack.pop()
        if leaving:
            on_path.discard(id(item))
            checked.add(id(item))
            continue
        if isinstance(item, dict | list | tuple):
            if id(item) in on_path:
                return f"{place} refers back to a container it is inside (a cycle)"
            if id(item) in checked:
                continue
            on_path.add(id(item))
            stack.append((item, place, True))
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        return (
                            f"{place} has the key {key!r} ({type(key).__name__}): "
                            "JSON object keys are strings"
                        )
                    stack.append((child, f"{place}[{key!r}]", False))
            else:
                stack.extend((child, f"{place}[{i}]", False) for i, child in enumerate(item))
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{place} is {item!r}, which JSON cannot hold"
        elif not (item is None or isinstance(item, str | int)):
            return (
                f"{place} is of type {type(item).__name__}, not a JSON value "
                "(a dict, list, string, number, boolean or None)"
            )
    return None


def _identity_part(value: Any, field_name: str) -> str:
    return require_text(value, field_name)


def _stored_args(args: Any) -> dict[str, Any]:
    """``args`` as stored: checked to be a JSON object with string keys, kept as given."""
    if not isinstance(args, dict) or not all(isinstance(k, str) for k in args):
        raise InvalidArgumentError("args must be a JSON object with string keys")
    # An empty object has nothing to check: skip the JSON round trip (the usual case).
    return _json_object(args, "args") if args else {}


def _declared_keys(opts: JobOptions, meta: dict[str, Any]) -> frozenset[str]:
    """The sensitive key names declared for this job: its worker's and registry's, its
    builder's, and any ``meta["sensitive_keys"]`` given (recorded back, sorted, in meta)."""
    declared = opts.sensitive_keys
    if SENSITIVE_KEYS_META in meta:
        declared |= sensitive_key_names(meta[SENSITIVE_KEYS_META], "meta['sensitive_keys']")
    if declared:
        meta[SENSITIVE_KEYS_META] = sorted(declared)
    return declared


def _redacted_copy(args: dict[str, Any], declared: frozenset[str]) -> Any:
    """The args as shown, when redaction changes them (None otherwise): what search reads."""
    if not args:
        return None
    shown = redact_value(args, declared)
    return None if shown == args else shown


def build_row(opts: JobOptions, now: datetime) -> dict[str, Any]:
    """Validate ``opts`` and build the ``kickside_job`` row to insert at ``now``."""
    worker = validate_name(opts.worker, "worker")
    queue = validate_name(opts.queue, "queue", max_length=128)
    if isinstance(opts.priority, bool) or not isinstance(opts.priority, int):
        raise InvalidArgumentError(f"priority must be an integer, got {opts.priority!r}")
    priority = min(9, max(0, opts.priority))
    max_attempts = _max_attempts(opts.max_attempts)
    args = _stored_args(opts.args)
    meta = {} if opts.meta == {} else _json_object(dict(opts.meta), "meta")
    # The search copy is the engine's: one given (copied from another job's meta) is replaced.
    meta.pop(REDACTED_ARGS_META, None)
    declared = _declared_keys(opts, meta)
    shown = _redacted_copy(args, declared)
    if shown is not None:
        meta[REDACTED_ARGS_META] = shown
    tags: list[str] = []
    for tag in opts.tags:
        if not isinstance(tag, str) or not tag:
            raise InvalidArgumentError(f"tags must be non-empty strings (≤255), got {tag!r}")
        require_text(tag, "tag", allow_empty=True)
        if tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise InvalidArgumentError(f"at most {MAX_TAGS} tags, got {len(tags)}")
    if opts.scheduled_at is not None:
        scheduled_at = ensure_aware(opts.scheduled_at, "schedule_at")
    elif opts.schedule_in is not None:
        try:
            scheduled_at = now + opts.schedule_in
        except OverflowError:
            raise InvalidArgumentError(
                f"schedule_in {opts.schedule_in} is out of range (years 1..9999)"
            ) from None
    else:
        scheduled_at = now
    max_execution_ms = opts.max_execution_ms
    if max_execution_ms is not None and (
        isinstance(max_execution_ms, bool)
        or not isinstance(max_execution_ms, int)
        or not 0 < max_execution_ms <= 30 * 24 * 3600 * 1000
    ):
        raise InvalidArgumentError(f"max_execution_ms must be 1..30 days, got {max_execution_ms!r}")
    identity = (opts.namespace, opts.scope, opts.identity_key)
    if opts.kind is JobKind.SLOT or identity != (None, None, None):
        identity = (
            _identity_part(opts.namespace, "namespace"),
            _identity_part(opts.scope, "scope"),
            _identity_part(opts.identity_key, "key"),
        )
    concurrency_key = opts.concurrency_key
    if concurrency_key is not None:
        concurrency_key = _identity_part(concurrency_key, "concurrency_key")
    if opts.capacity is not None:
        if concurrency_key is None:
            raise InvalidArgumentError(
                f"worker {worker!r} declares capacity group {opts.capacity.group!r}: "
                "its jobs need a non-empty concurrency_key"
            )
        meta["capacity"] = opts.capacity.as_meta()
    unique_key = None
    if opts.unique is not None:
        meta["unique_states"] = opts.unique.states
        unique_key = opts.unique.key(worker, queue, args, now)
    state = JobState.SCHEDULED if scheduled_at > now else JobState.AVAILABLE
    return {
        "id": uuid7(),
        "kind": opts.kind.value,
        "state": state.value,
        "queue": queue,
        "worker": worker,
        "args": args,
        "meta": meta,
        "tags": tags,
        "errors": [],
        "attempt": 0,
        "max_attempts": max_attempts,
        "priority": priority,
        "unique_key": unique_key,
        "namespace": identity[0],
        "scope": identity[1],
        "identity_key": identity[2],
        "concurrency_key": concurrency_key,
        "capacity_group": opts.capacity.group if opts.capacity is not None else None,
        "demand_pending": False,
        "control_pending": False,
        "demand_seq": 0,
        "rescue_count": 0,
        "max_execution_ms": max_execution_ms,
        "inserted_at": now,
        "scheduled_at": scheduled_at,
        "updated_at": now,
    }


def _insert_ignoring_unique_conflict(db: Database) -> Any:
    table = db.tables.job
    return db.upsert_insert(table).on_conflict_do_nothing(
        index_elements=["unique_key"], index_where=table.c.unique_key.is_not(None)
    )


def enqueue(
    db: Database,
    job: JobBuilder,
    *,
    conn: Connection | None = None,
    now: datetime | None = None,
) -> Inserted:
    """Insert one job through ``conn`` (the caller's transaction) or a transaction of its own.

    Returns the job's id and whether an existing job with the same unique key was found
    instead (``duplicate=True``). Wakes this process's pools at once; on PostgreSQL, pools
    everywhere wake when the transaction commits.
    """
    opts = job.options
    if opts.kind is JobKind.SLOT:
        from kickside_engine.slots import enqueue_slot

        return enqueue_slot(db, job, conn=conn, now=now)
    now = ensure_aware(now, "now") if now is not None else utcnow()
    row = build_row(opts, now)
    if conn is None and _single_statement(db, row):
        # One statement, atomic by itself: no BEGIN and COMMIT round trips around it, sent
        # straight to the driver (SQLAlchemy's per-call work was a third of a single enqueue).
        db.execute_autocommit(_insert_and_notify_sql(db, tuple(row)), _insert_params(db, row))
        result = Inserted(id=row["id"], duplicate=False, state=JobState(row["state"]))
    elif conn is None:
        with db.begin() as own:
            result = _insert_one(db, own, row)
    else:
        result = _insert_one(db, conn, row)
    if not result.duplicate:
        local_signal(db).wake(row["queue"])
    return result


def _single_statement(db: Database, row: dict[str, Any]) -> bool:
    """Whether :func:`_insert_one` writes this row in a single statement (PostgreSQL, no
    uniqueness or identity to check first)."""
    return db.is_postgresql and row["unique_key"] is None and row["identity_key"] is None


def _insert_one(db: Database, conn: Connection, row: dict[str, Any]) -> Inserted:
    table = db.tables.job
    state = JobState(row["state"])
    if row["identity_key"] is not None:
        holder = conn.execute(
            select(table.c.id, table.c.state).where(
                table.c.namespace == row["namespace"],
                table.c.scope == row["scope"],
                table.c.identity_key == row["identity_key"],
            )
        ).one_or_none()
        if holder is not None:
            raise ConflictError(
                f"identity {row['namespace']}/{row['scope']}/{row['identity_key']} is held by "
                f"job {holder.id} ({holder.state})",
                {"identity_in_use": True, "job_id": str(holder.id), "state": holder.state},
            )
    if row["unique_key"] is None:
        if db.is_postgresql:
            # One round trip: the NOTIFY rides on the INSERT (delivered at commit).
            conn.exec_driver_sql(_insert_and_notify_sql(db, tuple(row)), _insert_params(db, row))
        else:
            conn.execute(insert(table), row)
            notify_in_transaction(conn, db, row["queue"])
        return Inserted(id=row["id"], duplicate=False, state=state)
    stmt = _insert_ignoring_unique_conflict(db).returning(table.c.id)
    for _ in range(5):
        inserted = conn.execute(stmt, row).scalar_one_or_none()
        if inserted is not None:
            notify_in_transaction(conn, db, row["queue"])
            return Inserted(id=inserted, duplicate=False, state=state)
        existing = conn.execute(
            select(table.c.id, table.c.state).where(table.c.unique_key == row["unique_key"])
        ).one_or_none()
        if existing is not None:
            return Inserted(id=existing.id, duplicate=True, state=JobState(existing.state))
        # The holder reached a final state and released its key between the two statements.
    raise InvalidArgumentError("unique insert kept conflicting with a job that vanished; retry")


def _insert_params(db: Database, row: dict[str, Any]) -> dict[str, Any]:
    """The parameters of :func:`_insert_and_notify_sql` for ``row``; JSON goes as text, cast
    by the statement."""
    params = {
        name: (encode_json(value) if value else _EMPTY_JSON[key]) if key in _EMPTY_JSON else value
        for (key, value), name in zip(row.items(), _param_names(tuple(row)), strict=True)
    }
    params["p_channel"] = channel_name(db)
    return params


@lru_cache(maxsize=16)
def _param_names(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f"p_{k}" for k in keys)


def _insert_and_notify_sql(db: Database, keys: tuple[str, ...]) -> str:
    """:func:`_insert_and_notify` compiled for PostgreSQL (psycopg's ``%(name)s`` style)."""
    return _compiled_insert_and_notify(db.tables, db.engine.dialect, keys)


@lru_cache(maxsize=16)
def _compiled_insert_and_notify(tables: Tables, dialect: Any, keys: tuple[str, ...]) -> str:
    return str(_insert_and_notify(tables, keys).compile(dialect=dialect))


@lru_cache(maxsize=16)
def _insert_and_notify(tables: Tables, keys: tuple[str, ...]) -> Any:
    """``WITH inserted AS (INSERT … RETURNING queue) SELECT pg_notify(channel, queue)``."""
    job = tables.job
    inserted = (
        insert(job)
        .values({k: bindparam(f"p_{k}", type_=job.c[k].type) for k in keys})
        .returning(job.c.queue)
        .cte("inserted")
    )
    return select(func.pg_notify(bindparam("p_channel", type_=String), inserted.c.queue))


def enqueue_many(
    db: Database,
    jobs: Sequence[JobBuilder],
    *,
    conn: Connection | None = None,
    now: datetime | None = None,
) -> list[Inserted]:
    """Insert many jobs in batched multi-row statements (a fan-out). Refuses unique jobs.

    One bad job writes none: every job is validated before anything is written or, when the
    rows stream into PostgreSQL in a transaction of this call's own, before it commits.
    """
    now = ensure_aware(now, "now") if now is not None else utcnow()
    for builder in jobs:
        _refuse_in_bulk(builder.options, "enqueue_many")
    if not jobs:
        return []
    return _insert_built(db, len(jobs), (lambda: (build_row(b.options, now) for b in jobs)), conn)


def enqueue_fanout(
    db: Database,
    template: JobBuilder,
    args: Sequence[Any],
    *,
    conn: Connection | None = None,
    now: datetime | None = None,
) -> list[Inserted]:
    """Insert one job per element of ``args``, every other option taken from ``template``.

    The fastest way to enqueue many jobs of one kind (send this mail to 10,000 users): the
    template's options are validated once, and each job only adds its id and its args (each
    checked like any job's, with its redacted copy for search when redaction changes it).
    Otherwise exactly ``enqueue_many`` of
    ``template`` with each args: the same refusals (unique, slot and identity jobs), the same
    rows, all or nothing. Returns the inserted jobs in the order of ``args``.
    """
    now = ensure_aware(now, "now") if now is not None else utcnow()
    _refuse_in_bulk(template.options, "enqueue_fanout")
    if isinstance(args, (str, bytes, Mapping)) or not isinstance(args, Sequence):
        raise InvalidArgumentError(
            f"enqueue_fanout takes a list of args objects, got {type(args).__name__}"
        )
    if not args:
        return []
    base = build_row(replace(template.options, args={}), now)
    if db.is_postgresql and len(args) >= COPY_FROM_ROWS:
        return _copy_fanout(db, base, args, conn)

    def built() -> Iterator[dict[str, Any]]:
        for id_, stored, shown in _fanned_out(args, base["meta"]):
            row = base.copy()
            row["id"], row["args"] = id_, stored
            if shown is not None:
                row["meta"] = {**base["meta"], REDACTED_ARGS_META: shown}
            yield row

    return _insert_built(db, len(args), built, conn)


def _fanned_out(
    args: Sequence[Any], meta: dict[str, Any]
) -> Iterator[tuple[uuid.UUID, dict[str, Any], Any]]:
    """Each fanned-out job's new id, its args as stored (checked, as given) and their redacted
    copy when redaction changes them (else None), with the names ``meta`` declares."""
    declared = frozenset(meta.get(SENSITIVE_KEYS_META, ()))
    for one in args:
        stored = _stored_args(_args_dict(one))
        yield uuid7(), stored, _redacted_copy(stored, declared)


#: Lines a fan-out hands COPY at a time.
_FANOUT_CHUNK = 1_000


def _copy_fanout(
    db: Database, base: dict[str, Any], args: Sequence[Any], conn: Connection | None
) -> list[Inserted]:
    """COPY one line per args: the id, the args, the meta (``base``'s, formatted once, unless
    the job has a redacted copy of its args to add), then ``base``'s other values formatted
    once (NULL columns left out, NULL anyway). Streams in a transaction of its own; in the
    caller's, every args is validated before anything is written, so that transaction stays
    usable."""
    per_row = ("id", "args", "meta")
    shared = [c for c, v in base.items() if c not in per_row and v is not None]
    meta = base["meta"]
    plain_meta = copy_text(meta)
    suffix = "".join("\t" + copy_text(base[c]) for c in shared) + "\n"
    ids: list[uuid.UUID] = []

    def lines() -> Iterator[str]:
        for id_, stored, shown in _fanned_out(args, meta):
            ids.append(id_)
            text = escape(encode_json(stored)) if stored else "{}"
            meta_text = (
                plain_meta if shown is None else copy_text({**meta, REDACTED_ARGS_META: shown})
            )
            yield f"{id_}\t{text}\t{meta_text}{suffix}"

    table = db.engine.dialect.identifier_preparer.format_table(db.tables.job)
    names = ", ".join(f'"{c}"' for c in (*per_row, *shared))

    def write(into: Connection, stream: Iterator[str]) -> None:
        driver: Any = into.connection.driver_connection
        with driver.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            while chunk := "".join(itertools.islice(stream, _FANOUT_CHUNK)):
                copy.write(chunk)
        _notify_queues(db, into, {base["queue"]})

    if conn is None:
        with db.begin() as own:
            write(own, lines())
    else:
        write(conn, iter(list(lines())))
    local_signal(db).wake(base["queue"])
    state = JOB_STATES_BY_VALUE[base["state"]]
    return [Inserted(id=id_, duplicate=False, state=state) for id_ in ids]


def _refuse_in_bulk(opts: JobOptions, call: str) -> None:
    if opts.unique is not None:
        raise InvalidArgumentError(
            f"{call} refuses unique jobs ({opts.worker}): insert them one by one"
        )
    if opts.kind is JobKind.SLOT or opts.identity_key is not None:
        raise InvalidArgumentError(f"{call} refuses slot and identity jobs")


def _insert_built(
    db: Database,
    count: int,
    rows: Callable[[], Iterator[dict[str, Any]]],
    conn: Connection | None,
) -> list[Inserted]:
    """Insert the ``count`` rows that ``rows()`` builds (validating each), all or none."""
    if conn is None and db.is_postgresql and count >= COPY_FROM_ROWS:
        # Each row is built while COPY streams the ones before it: the server inserts while
        # the client validates. A bad job aborts the COPY, and the transaction rolls back.
        # Only what the result needs is kept of each row: the rest is freed as it is sent
        # (keeping 20,000 rows alive made the garbage collector's passes a third of the time).
        kept: list[tuple[uuid.UUID, str, str]] = []

        def built() -> Iterator[dict[str, Any]]:
            for row in rows():
                kept.append((row["id"], row["state"], row["queue"]))
                yield row

        with db.begin() as own:
            _copy_rows(db, own, built())
            queues = {queue for _, _, queue in kept}
            _notify_queues(db, own, queues)
    else:
        # A caller's transaction must stay usable after a bad job: validate them all first.
        listed = list(rows())
        if conn is None:
            with db.begin() as own:
                _insert_rows(db, own, listed)
        else:
            _insert_rows(db, conn, listed)
        kept = [(r["id"], r["state"], r["queue"]) for r in listed]
        queues = {queue for _, _, queue in kept}
    signal = local_signal(db)
    for queue in queues:
        signal.wake(queue)
    return [
        Inserted(id=id_, duplicate=False, state=JOB_STATES_BY_VALUE[state])
        for id_, state, _ in kept
    ]


#: Rows from which a bulk insert on PostgreSQL streams with COPY instead of INSERT.
COPY_FROM_ROWS = 50
#: The JSON columns, and their text when empty (most rows: no tags, no errors yet, no meta).
_EMPTY_JSON = {"args": "{}", "meta": "{}", "tags": "[]", "errors": "[]"}
_JSON_COLUMNS = frozenset(_EMPTY_JSON)


def _insert_rows(db: Database, conn: Connection, rows: list[dict[str, Any]]) -> None:
    if db.is_postgresql and len(rows) >= COPY_FROM_ROWS:
        _copy_rows(db, conn, rows)
    else:
        conn.execute(insert(db.tables.job), rows)
    _notify_queues(db, conn, {r["queue"] for r in rows})


def _notify_queues(db: Database, conn: Connection, queues: set[str]) -> None:
    for queue in sorted(queues):
        notify_in_transaction(conn, db, queue)


def _copy_rows(db: Database, conn: Connection, rows: Iterable[dict[str, Any]]) -> None:
    """Stream rows into the job table with COPY, inside ``conn``'s transaction.

    Several times faster than a pipelined INSERT per row: one statement, no per-row round of
    parse, bind and execute on the server. Every row has the keys of the first (build_row's).
    """
    stream = iter(rows)
    first = next(stream, None)
    if first is None:
        return
    columns = list(first)
    table = db.engine.dialect.identifier_preparer.format_table(db.tables.job)
    names = ", ".join(f'"{c}"' for c in columns)
    json_at = [i for i, c in enumerate(columns) if c in _JSON_COLUMNS]
    driver: Any = conn.connection.driver_connection
    with driver.cursor() as cursor, cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in itertools.chain((first,), stream):
            values = list(row.values())
            for i in json_at:
                value = values[i]
                values[i] = encode_json(value) if value else ("{}" if value == {} else "[]")
            copy.write_row(values)
