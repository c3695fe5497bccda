"""Enqueueing: one job (with uniqueness and identity), many jobs, and a fan-out of one kind.

A job is written through the caller's connection when one is given, so it commits (or rolls
back) with the caller's own data, else in a transaction of its own. Rows are built and checked
by :mod:`kickside_engine.job_row` and written by :mod:`kickside_engine.store.inserts`; this
module decides which way each goes and wakes this process's pools at once (on PostgreSQL pools
everywhere wake when the transaction commits). Timestamps come from the application clock in
UTC.

A job built from a registered worker (``worker.new(...)``) calls its registry's ``on_enqueue``
hooks once the insert is done: when the enqueue has a transaction of its own, after it commits;
in the caller's transaction (``conn=``), after the insert and before the caller commits, so a
hook may see a job that the caller then rolls back. Before the insert, the registry's
``enqueue_meta`` providers add their entries to the job's meta (a trace context). A builder
made by worker name has no registry and calls none.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection

from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.hooks import Enqueued, fire
from kickside_engine.ids import uuid7
from kickside_engine.job_row import JobOptions, args_dict, build_row, redacted_copy, stored_args
from kickside_engine.models import JOB_STATES_BY_VALUE, Inserted, JobKind, JobState
from kickside_engine.redact import REDACTED_ARGS_META, SENSITIVE_KEYS_META
from kickside_engine.store.copy_text import copy_text, encode_json, escape
from kickside_engine.store.database import Database
from kickside_engine.store.inserts import (
    COPY_FROM_ROWS,
    copy_lines,
    copy_rows,
    insert_job,
    insert_job_autocommit,
    insert_rows,
    notify_queues,
    single_statement,
)
from kickside_engine.store.notify import local_signal

if TYPE_CHECKING:
    from kickside_engine.builder import JobBuilder


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
    job = job.with_enqueue_meta()
    opts = job.options
    if opts.kind is JobKind.SLOT:
        from kickside_engine.enrollment import enqueue_slot

        result = enqueue_slot(db, job, conn=conn, now=now)
        fire_enqueued([job], [result])
        return result
    now = ensure_aware(now, "now") if now is not None else utcnow()
    row = build_row(opts, now)
    if conn is None and single_statement(db, row):
        insert_job_autocommit(db, row)
        result = Inserted(id=row["id"], duplicate=False, state=JobState(row["state"]))
    else:
        with db.transaction(conn) as tx:
            result = insert_job(db, tx, row)
    if not result.duplicate:
        local_signal(db).wake(row["queue"])
    if job.hooks is not None and job.hooks.on_enqueue:
        fire_enqueued([job], [result])
    return result


def fire_enqueued(builders: Sequence[JobBuilder], inserted: Sequence[Inserted]) -> None:
    """Call the ``on_enqueue`` hooks of each builder's registry with its inserted job.

    ``builders`` holds one builder per inserted job, or one for all (a fan-out's template).
    """
    for i, one in enumerate(inserted):
        builder = builders[i] if len(builders) > 1 else builders[0]
        hooks = builder.hooks
        if hooks is not None and hooks.on_enqueue:
            opts = builder.options
            event = Enqueued(one.id, opts.worker, opts.queue, one.state, one.duplicate)
            fire(hooks.on_enqueue, event)


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
    jobs = [b.with_enqueue_meta() for b in jobs]
    inserted = _insert_built(
        db, len(jobs), (lambda: (build_row(b.options, now) for b in jobs)), conn
    )
    if any(b.hooks is not None and b.hooks.on_enqueue for b in jobs):
        fire_enqueued(jobs, inserted)
    return inserted


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
    template = template.with_enqueue_meta()
    base = build_row(replace(template.options, args={}), now)
    if db.is_postgresql and len(args) >= COPY_FROM_ROWS:
        inserted = _copy_fanout(db, base, args, conn)
    else:
        inserted = _insert_built(db, len(args), lambda: _fanout_rows(base, args), conn)
    if template.hooks is not None and template.hooks.on_enqueue:
        fire_enqueued([template], inserted)
    return inserted


def _fanout_rows(base: dict[str, Any], args: Sequence[Any]) -> Iterator[dict[str, Any]]:
    """``base`` with each job's id and args (and redacted copy, when redaction changes them)."""
    for id_, stored, shown in _fanned_out(args, base["meta"]):
        row = base.copy()
        row["id"], row["args"] = id_, stored
        if shown is not None:
            row["meta"] = {**base["meta"], REDACTED_ARGS_META: shown}
        yield row


def _fanned_out(
    args: Sequence[Any], meta: dict[str, Any]
) -> Iterator[tuple[uuid.UUID, dict[str, Any], Any]]:
    """Each fanned-out job's new id, its args as stored (checked, as given) and their redacted
    copy when redaction changes them (else None), with the names ``meta`` declares."""
    declared = frozenset(meta.get(SENSITIVE_KEYS_META, ()))
    for one in args:
        stored = stored_args(args_dict(one))
        yield uuid7(), stored, redacted_copy(stored, declared)


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

    def write(into: Connection, stream: Iterator[str]) -> None:
        copy_lines(db, into, [*per_row, *shared], stream)
        notify_queues(db, into, {base["queue"]})

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
            copy_rows(db, own, built())
            queues = {queue for _, _, queue in kept}
            notify_queues(db, own, queues)
    else:
        # A caller's transaction must stay usable after a bad job: validate them all first.
        listed = list(rows())
        with db.transaction(conn) as tx:
            insert_rows(db, tx, listed)
        kept = [(r["id"], r["state"], r["queue"]) for r in listed]
        queues = {queue for _, _, queue in kept}
    signal = local_signal(db)
    for queue in queues:
        signal.wake(queue)
    return [
        Inserted(id=id_, duplicate=False, state=JOB_STATES_BY_VALUE[state])
        for id_, state, _ in kept
    ]
