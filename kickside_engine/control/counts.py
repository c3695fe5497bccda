"""Jobs per queue and state, exact or fast, for the overview and the queue listings.

An exact count is one GROUP BY over the whole job table: on PostgreSQL it reads every entry of
``ix_kickside_job_fetch`` (about 200 ms at a million jobs). A fast count (``exact=False``, on
PostgreSQL) reads only what an operator's numbers need:

- the (state, queue) pairs that exist, by a skip scan of ``ix_kickside_job_fetch (state,
  queue, ...)``: one index descent per pair;
- the unfinished states counted exactly (a range of the same index per pair: as cheap as the
  backlog is small);
- the final states (completed, cancelled, discarded: history, which only the Pruner shrinks)
  counted exactly up to ``exact_up_to`` per pair, and beyond that estimated from a block sample
  of the table (``TABLESAMPLE SYSTEM``, a fixed seed, so the figure stays put between refreshes
  while the table does); those cells are listed in :attr:`StateCounts.approximate`.

SQLite, the embedded default with small tables, always counts exactly. Just-in-time
compilation is switched off for these reads on PostgreSQL: the planner's cost estimates for the
skip scan are far above its real cost, and compiling would take longer than the query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    ScalarSelect,
    String,
    case,
    column,
    func,
    literal,
    select,
    text,
    values,
)

from kickside_engine.models import JobState
from kickside_engine.store.database import Database

#: Final states whose count may be estimated.
FINAL = (JobState.COMPLETED, JobState.CANCELLED, JobState.DISCARDED)
#: A final (state, queue) cell is counted exactly up to this many jobs, estimated beyond.
EXACT_UP_TO = 1_000
#: About this many table pages are sampled for the estimates (8 MB of a table's heap).
SAMPLE_PAGES = 1_000
_SAMPLE_SEED = 20261130


def zero_counts() -> dict[JobState, int]:
    """Every state with a count of zero."""
    return dict.fromkeys(JobState, 0)


@dataclass(frozen=True)
class StateCounts:
    """Jobs per queue and state (every state present in each queue's dict, zero when none).

    ``approximate`` maps a queue to the states whose count there is an estimate; queues with
    only exact counts are absent.
    """

    counts: dict[str, dict[JobState, int]]
    approximate: dict[str, frozenset[JobState]] = field(default_factory=dict)

    def is_approximate(self, queue: str, state: JobState) -> bool:
        """Whether the count of ``state`` in ``queue`` is an estimate."""
        return state in self.approximate.get(queue, frozenset())


def read_state_counts(
    db: Database,
    conn: Connection,
    queue: str | None = None,
    *,
    exact: bool = True,
    exact_up_to: int | None = None,
) -> StateCounts:
    """Jobs per queue and state through ``conn`` (only ``queue``'s when given).

    With ``exact=False`` on PostgreSQL, counts of final states above ``exact_up_to`` (default
    :data:`EXACT_UP_TO`) are estimates (see the module's docstring); everything else is exact.
    """
    if db.is_postgresql:
        conn.execute(text("SET LOCAL jit = off"))
        if not exact:
            cap = EXACT_UP_TO if exact_up_to is None else exact_up_to
            return _fast_counts(db, conn, queue, cap)
    job = db.tables.job
    stmt = select(job.c.queue, job.c.state, func.count()).group_by(job.c.queue, job.c.state)
    if queue is not None:
        stmt = stmt.where(job.c.queue == queue)
    counts: dict[str, dict[JobState, int]] = {}
    for name, state, count in conn.execute(stmt):
        counts.setdefault(name, zero_counts())[JobState(state)] = int(count)
    return StateCounts(counts)


def state_counts(db: Database) -> dict[str, dict[JobState, int]]:
    """Jobs per queue and state, counted exactly (every state present, zero when none)."""
    with db.read() as conn:
        return read_state_counts(db, conn).counts


def _fast_counts(db: Database, conn: Connection, queue: str | None, cap: int) -> StateCounts:
    job = db.tables.job
    final = [s.value for s in FINAL]
    states = values(column("state", String), name="states").data([(s.value,) for s in JobState])
    if queue is None:
        # A skip scan: the first queue of each state, then the next queue after each one found.
        def first_after(
            state: ColumnElement[Any], after: ColumnElement[Any] | None = None
        ) -> ScalarSelect[Any]:
            stmt = select(job.c.queue).where(job.c.state == state)
            if after is not None:
                stmt = stmt.where(job.c.queue > after)
            return stmt.order_by(job.c.queue).limit(1).scalar_subquery()

        seed = select(states.c.state, first_after(states.c.state).label("queue"))
        found = seed.cte("pairs", recursive=True)
        pairs = found.union_all(
            select(found.c.state, first_after(found.c.state, found.c.queue)).where(
                found.c.queue.is_not(None)
            )
        )
    else:
        pairs = select(states.c.state, literal(queue, String).label("queue")).cte("pairs")
    in_pair = (job.c.state == pairs.c.state, job.c.queue == pairs.c.queue)
    bounded = select(literal(1)).where(*in_pair).limit(cap + 1).correlate(pairs).subquery("bounded")
    count = case(
        (
            pairs.c.state.in_(final),
            select(func.count()).select_from(bounded).scalar_subquery(),
        ),
        else_=select(func.count()).where(*in_pair).correlate(pairs).scalar_subquery(),
    )
    stmt = select(pairs.c.queue, pairs.c.state, count).where(pairs.c.queue.is_not(None))
    counts: dict[str, dict[JobState, int]] = {}
    capped: dict[str, set[JobState]] = {}
    for name, state, n in conn.execute(stmt):
        if not n:
            continue
        member = JobState(state)
        counts.setdefault(name, zero_counts())[member] = int(n)
        if member in FINAL and n > cap:
            capped.setdefault(name, set()).add(member)
    if capped:
        estimates = _sampled_final_counts(db, conn, queue)
        for name, members in capped.items():
            for member in members:
                counts[name][member] = max(estimates.get((name, member), 0), cap + 1)
    return StateCounts(counts, {name: frozenset(m) for name, m in capped.items()})


def _sampled_final_counts(
    db: Database, conn: Connection, queue: str | None
) -> dict[tuple[str, JobState], int]:
    """Final jobs per (queue, state), scaled up from a block sample of about SAMPLE_PAGES."""
    job = db.tables.job
    pages = func.pg_relation_size(str(job.fullname)) / func.current_setting("block_size").cast(
        Integer
    )
    percent = func.least(100.0, 100.0 * SAMPLE_PAGES / func.greatest(pages, 1))
    sample = job.tablesample(func.system(percent), name="sampled", seed=literal(_SAMPLE_SEED))
    stmt = (
        select(sample.c.queue, sample.c.state, func.count() * 100.0 / percent)
        .where(sample.c.state.in_([s.value for s in FINAL]))
        .group_by(sample.c.queue, sample.c.state)
    )
    if queue is not None:
        stmt = stmt.where(sample.c.queue == queue)
    return {(name, JobState(state)): round(float(n)) for name, state, n in conn.execute(stmt)}
