"""The job builder: an immutable description of a job, inserted by :func:`enqueue`.

A job is written through the caller's connection, so it commits (or rolls back) with the
caller's own data::

    with db.begin() as conn:
        conn.execute(insert(orders).values(...))
        deliver_email.new({"order_id": 42}).queue("mailers").insert(db, conn=conn)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from kickside_engine.clock import ensure_aware
from kickside_engine.enqueue import enqueue
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.job_row import JobOptions, args_dict, checked_max_attempts
from kickside_engine.models import Inserted, JobKind
from kickside_engine.redact import sensitive_key_names
from kickside_engine.uniqueness import Unique

if TYPE_CHECKING:
    from sqlalchemy import Connection
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    from kickside_engine.hooks import Hooks
    from kickside_engine.store.async_database import AsyncDatabase
    from kickside_engine.store.database import Database
    from kickside_engine.workers import WorkerSpec


class JobBuilder:
    """An immutable description of a job to insert; each method returns a new builder."""

    __slots__ = ("hooks", "options")

    def __init__(self, worker: str, args: Any = None, **options: Any) -> None:
        self.options = JobOptions(worker=worker, args=args_dict(args), **options)
        #: The worker's registry's hooks (``on_enqueue``), for a builder made by the worker.
        self.hooks: Hooks | None = None

    @classmethod
    def for_worker(cls, spec: WorkerSpec, args: Any = None) -> JobBuilder:
        """A builder carrying a declared worker's defaults; ``args`` may be an instance of the
        worker's ``args_type``, stored as its JSON encoding."""
        builder = cls(
            spec.name,
            args if args is None or type(args) is dict else spec.encode_args(args),
            queue=spec.queue,
            priority=spec.priority,
            max_attempts=spec.max_attempts,
            unique=spec.unique,
            tags=spec.tags,
            max_execution_ms=int(spec.timeout / timedelta(milliseconds=1)),
            capacity=spec.capacity,
            sensitive_keys=spec.sensitive_keys,
        )
        builder.hooks = spec.hooks
        return builder

    def _with(self, **changes: Any) -> JobBuilder:
        new = JobBuilder.__new__(JobBuilder)
        new.options = replace(self.options, **changes)
        new.hooks = self.hooks
        return new

    def with_enqueue_meta(self) -> JobBuilder:
        """This builder with its registry's ``enqueue_meta`` entries added (itself when it has
        none): what an enqueue inserts, computed in the caller's context."""
        if self.hooks is None or not self.hooks.enqueue_meta:
            return self
        from kickside_engine.hooks import enqueue_meta

        return self._with(meta=enqueue_meta(self.hooks, self.options.meta))

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
        return self._with(max_attempts=checked_max_attempts(value))

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

    async def insert_async(
        self,
        adb: AsyncDatabase,
        *,
        conn: AsyncConnection | AsyncSession | None = None,
        now: datetime | None = None,
    ) -> Inserted:
        """Insert the job from asyncio code, in ``conn``'s transaction (an ``AsyncConnection``
        or ``AsyncSession``) or one of its own (see
        :func:`~kickside_engine.async_enqueue.enqueue_async`)."""
        from kickside_engine.async_enqueue import enqueue_async

        return await enqueue_async(adb, self, conn=conn, now=now)

    def __repr__(self) -> str:
        return f"JobBuilder({self.options.worker!r}, queue={self.options.queue!r})"
