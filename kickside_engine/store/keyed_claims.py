"""Claims that admit jobs within their concurrency keys and capacity groups, in one order.

A job whose worker declares a capacity group is admitted while the group's executing jobs stay
below its ``global_limit`` and the key's below its ``concurrency_key_limit``, and while the
starts counted in the current window stay below its ``rate_limit`` and the key's below its
``rate_limit_per_key`` (when set; :mod:`kickside_engine.store.rate_windows`), all read from
``kickside_setting`` now (never cached between claims). Missing or invalid settings refuse
admission; they never lift the limit (a rate limit that is not set is no limit). A job held back
stays available, uncharged: its attempt counts only when it is claimed. A keyed job without a
group is single-flight: at most one executing job per key. Jobs without a key are always
admissible.

:func:`claim_keyed` walks the queue's due jobs, keyed and keyless alike, in claim order
(priority, scheduled_at, id) and admits each that its limits allow, so a keyed job is never
passed over for a keyless job behind it. A key or group at its limit never holds back another:
once one is found at its limit (concurrent or rate) the walk re-reads the queue without its jobs
(the database skips them in the index scan), so one key's backlog of any size costs one scan
past it, not a claim that finds nothing else. The walk pages through the queue until the claim
is full or the queue has no more due jobs.

Admission is decided and the jobs claimed in one transaction, after usage is counted under a
lock: on PostgreSQL a transaction-level advisory lock serialises every admitting claimer (the
claims of keyless jobs only, the pool's fast path, never take it); SQLite's single writer
serialises them already. The claim's time is read after that, so a run never appears in the
history to start before the run whose end admitted it had finished; the claim adds its starts to
the rate windows of that time in the same transaction, before the lock is released.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    and_,
    func,
    literal,
    or_,
    select,
    text,
    tuple_,
)

from kickside_engine.clock import utcnow
from kickside_engine.models import ClaimedJob, JobState
from kickside_engine.store.claims import claim_jobs
from kickside_engine.store.database import Database
from kickside_engine.store.group_limits import GroupLimits, read_group_limits
from kickside_engine.store.rate_windows import GROUP_KEY, add_window_counts, window_counts
from kickside_engine.store.tables import state_literal

#: Due jobs read per page of the walk, at least (a claim of ``limit`` reads ``2 * limit``).
PAGE_ROWS = 64
ADMISSION_LOCK_NAME = "admission"


def queue_is_paused(db: Database, conn: Connection, queue: str) -> bool:
    """Whether ``queue`` is paused (shared by every node)."""
    q = db.tables.queue
    paused = conn.execute(select(q.c.paused).where(q.c.name == queue)).scalar_one_or_none()
    return bool(paused)


def _lock_id(kind: str, name: str) -> int:
    digest = hashlib.blake2b(f"kickside:{kind}:{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


@dataclass
class Admission:
    """What one claim may still admit: usage counted now, limits read as groups turn up, and
    the keys and groups found at their limit (which the walk's next page leaves out)."""

    db: Database
    conn: Connection
    #: The claim's time: which rate windows admissions count in.
    now: datetime | None = None
    per_key: Counter[str] = field(default_factory=Counter)
    per_group: Counter[str] = field(default_factory=Counter)
    per_group_key: Counter[tuple[str, str]] = field(default_factory=Counter)
    limits: dict[str, GroupLimits] = field(default_factory=dict)
    #: Keys of jobs without a group that are held (single-flight: one executing job).
    full_keys: set[str] = field(default_factory=set)
    #: Groups at their global limit, or whose settings refuse admission.
    full_groups: set[str] = field(default_factory=set)
    #: (group, key) pairs at the group's per-key limit.
    full_pairs: set[tuple[str, str]] = field(default_factory=set)
    #: Starts in the current rate windows by (group, key or ``GROUP_KEY``), read as groups and
    #: keys turn up, plus this claim's admissions.
    rate_used: Counter[tuple[str, str]] = field(default_factory=Counter)
    rate_read: set[tuple[str, str]] = field(default_factory=set)

    def count_executing(self) -> None:
        """Count the executing keyed jobs (every queue: keys and groups span queues)."""
        job = self.db.tables.job
        rows = self.conn.execute(
            select(job.c.capacity_group, job.c.concurrency_key, func.count())
            .where(
                job.c.state == state_literal(JobState.EXECUTING.value),
                job.c.concurrency_key.is_not(None),
            )
            .group_by(job.c.capacity_group, job.c.concurrency_key)
        ).all()
        for group, key, count in rows:
            self._take(group, key, count)
        self.full_keys.update(k for k, n in self.per_key.items() if n >= 1)

    def _take(self, group: str | None, key: str, count: int = 1) -> None:
        self.per_key[key] += count
        if group:
            self.per_group[group] += count
            self.per_group_key[(group, key)] += count

    def _group_limits(self, group: str, job_id: Any) -> GroupLimits:
        limits = self.limits.get(group)
        if limits is None:
            job = self.db.tables.job
            meta = self.conn.execute(select(job.c.meta).where(job.c.id == job_id)).scalar_one()
            declaration = (meta or {}).get("capacity") or {}
            limits = self.limits[group] = read_group_limits(self.db, self.conn, declaration)
        return limits

    def read_rates(self, rows: Sequence[Any]) -> None:
        """Read the rate windows' counts of the groups and keys of one page of due jobs, one
        query per rate-limited group (not one per job)."""
        assert self.now is not None
        wanted: dict[str, set[str]] = {}
        for row in rows:
            group, key = row.capacity_group, row.concurrency_key
            if not group or key is None or group in self.full_groups:
                continue
            limits = self._group_limits(group, row.id)
            keys = wanted.setdefault(group, set())
            if limits.rate is not None:
                keys.add(GROUP_KEY)
            if limits.per_key_rate is not None:
                keys.add(key)
        for group, keys in wanted.items():
            limits = self.limits[group]
            for rate, subset in (
                (limits.rate, {k for k in keys if k == GROUP_KEY}),
                (limits.per_key_rate, {k for k in keys if k != GROUP_KEY}),
            ):
                unread = {k for k in subset if (group, k) not in self.rate_read}
                if rate is None or not unread:
                    continue
                found = window_counts(self.db, self.conn, group, unread, rate.window_at(self.now))
                for key in unread:
                    self.rate_read.add((group, key))
                    self.rate_used[(group, key)] += found.get(key, 0)

    def _group_full(self, group: str, limits: GroupLimits) -> bool:
        assert limits.global_limit is not None
        return self.per_group[group] >= limits.global_limit or (
            limits.rate is not None and self.rate_used[(group, GROUP_KEY)] >= limits.rate.limit
        )

    def _pair_full(self, group: str, key: str, limits: GroupLimits) -> bool:
        assert limits.per_key_limit is not None
        return self.per_group_key[(group, key)] >= limits.per_key_limit or (
            limits.per_key_rate is not None
            and self.rate_used[(group, key)] >= limits.per_key_rate.limit
        )

    def started(self, claimed: Sequence[ClaimedJob]) -> dict[tuple[str, str, Any, Any], int]:
        """The starts of ``claimed`` to add to each rate window: (group, key, start, end)."""
        assert self.now is not None
        counts: Counter[tuple[str, str, Any, Any]] = Counter()
        for c in claimed:
            group, key = c.job.capacity_group, c.job.concurrency_key
            limits = self.limits.get(group or "")
            if limits is None or key is None:
                continue
            for rate, counted in ((limits.rate, GROUP_KEY), (limits.per_key_rate, key)):
                if rate is not None:
                    counts[(str(group), counted, *rate.window_at(self.now))] += 1
        return dict(counts)

    def admit(self, row: Any) -> bool:
        """Admit the due job ``row`` if its limits allow it now, counting it; else note the
        key or group that holds it back."""
        key, group = row.concurrency_key, row.capacity_group
        if key is None:
            return True
        if not group:
            if key in self.full_keys:
                return False
            self._take(None, key)
            self.full_keys.add(key)
            return True
        if group in self.full_groups or (group, key) in self.full_pairs:
            return False
        limits = self._group_limits(group, row.id)
        if not limits.usable:
            self.full_groups.add(group)
            return False
        admitted = not self._group_full(group, limits) and not self._pair_full(group, key, limits)
        if admitted:
            self._take(group, key)
            self.rate_used[(group, GROUP_KEY)] += 1
            self.rate_used[(group, key)] += 1
        if self._group_full(group, limits):
            self.full_groups.add(group)
        if self._pair_full(group, key, limits):
            self.full_pairs.add((group, key))
        return admitted

    def open_jobs(self, job: Any) -> Any:
        """A filter leaving out the jobs of every key and group found at its limit so far."""
        keyless = job.c.concurrency_key.is_(None)
        ungrouped = job.c.capacity_group.is_(None)
        if self.full_keys:
            ungrouped = and_(ungrouped, job.c.concurrency_key.not_in(sorted(self.full_keys)))
        grouped = job.c.capacity_group.is_not(None)
        if self.full_groups:
            grouped = and_(grouped, job.c.capacity_group.not_in(sorted(self.full_groups)))
        if self.full_pairs:
            pairs = tuple_(job.c.capacity_group, job.c.concurrency_key)
            grouped = and_(grouped, pairs.not_in(sorted(self.full_pairs)))
        return or_(keyless, ungrouped, grouped)


def choose_jobs(
    db: Database,
    conn: Connection,
    admission: Admission,
    *,
    queue: str,
    limit: int,
    now: datetime,
    workers: Sequence[str] | None = None,
) -> list[Any]:
    """The ids of up to ``limit`` due jobs of ``queue`` to claim, in claim order, each admitted
    by ``admission`` (which counts them)."""
    job = db.tables.job
    page = max(2 * limit, PAGE_ROWS)
    chosen: list[Any] = []
    after: tuple[Any, Any, Any] | None = None
    while len(chosen) < limit:
        stmt = (
            select(
                job.c.id,
                job.c.concurrency_key,
                job.c.capacity_group,
                job.c.priority,
                job.c.scheduled_at,
            )
            .where(
                job.c.state == JobState.AVAILABLE.value,
                job.c.queue == queue,
                job.c.scheduled_at <= now,
                admission.open_jobs(job),
            )
            .order_by(job.c.priority, job.c.scheduled_at, job.c.id)
            .limit(page)
        )
        if workers is not None:
            stmt = stmt.where(job.c.worker.in_(list(workers)))
        if after is not None:
            stmt = stmt.where(
                tuple_(job.c.priority, job.c.scheduled_at, job.c.id)
                > tuple_(
                    literal(after[0], job.c.priority.type),
                    literal(after[1], job.c.scheduled_at.type),
                    literal(after[2], job.c.id.type),
                )
            )
        rows = conn.execute(stmt).all()
        admission.read_rates(rows)
        for row in rows:
            if admission.admit(row):
                chosen.append(row.id)
                if len(chosen) >= limit:
                    break
        if len(rows) < page:
            break
        last = rows[-1]
        after = (last.priority, last.scheduled_at, last.id)
    return chosen


def due_keyed_job_waits(
    db: Database,
    conn: Connection,
    *,
    queue: str,
    now: datetime,
    workers: Sequence[str] | None = None,
) -> bool:
    """Whether a due job with a concurrency key waits in ``queue`` (of ``workers``, if given).

    The pool's check before :func:`claim_keyed` once its keyless claim came back short: the
    fast claim took every keyless job among the first due ones, so with no keyed job due there
    is nothing the admission could add, and one indexed read spares its lock, its usage count
    and its transaction (which fall on the job that waits for this turn).
    """
    job = db.tables.job
    stmt = (
        select(literal(1))
        .where(
            job.c.state == state_literal(JobState.AVAILABLE),
            job.c.queue == queue,
            job.c.scheduled_at <= now,
            job.c.concurrency_key.is_not(None),
        )
        .limit(1)
    )
    if workers is not None:
        stmt = stmt.where(job.c.worker.in_(list(workers)))
    return conn.execute(stmt).first() is not None


def claim_keyed(
    db: Database,
    conn: Connection,
    *,
    queue: str,
    node: str,
    limit: int,
    lease: timedelta,
    code_version: str | None,
    now: datetime | None = None,
    workers: Sequence[str] | None = None,
) -> list[ClaimedJob]:
    """Admit and claim up to ``limit`` due jobs of ``queue``, keyed or not, in claim order.

    ``now`` (the claim's time, stored as the runs' start) is read after usage was counted under
    the admission lock unless the caller fixes it. ``workers``: only jobs of these workers.
    """
    if limit <= 0:
        return []
    if db.is_postgresql:
        conn.execute(
            text("SELECT pg_advisory_xact_lock(:id)"),
            {"id": _lock_id(ADMISSION_LOCK_NAME, db.schema or "")},
        )
    admission = Admission(db, conn)
    admission.count_executing()
    if now is None:
        now = utcnow()
    admission.now = now
    admitted = choose_jobs(db, conn, admission, queue=queue, limit=limit, now=now, workers=workers)
    if not admitted:
        return []
    claimed = claim_jobs(
        db,
        conn,
        queue=queue,
        node=node,
        limit=len(admitted),
        now=now,
        lease=lease,
        code_version=code_version,
        keyless_only=False,
        job_ids=admitted,
    )
    # What was claimed, not what was admitted: a job another transaction holds is skipped.
    add_window_counts(db, conn, admission.started(claimed))
    return claimed
