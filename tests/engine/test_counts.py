"""Jobs per queue and state: the fast counts agree with the exact ones and flag estimates."""

from __future__ import annotations

from datetime import timedelta

from kickside_engine import Database, JobBuilder, JobState, enqueue, enqueue_many
from kickside_engine.clock import utcnow
from kickside_engine.control import list_queues
from kickside_engine.control.counts import StateCounts, read_state_counts, state_counts
from kickside_engine.control.metrics import overview
from kickside_engine.testing import drain_jobs

from ..support.workers import registry


def _history(db: Database) -> None:
    """mailers: 6 completed, 2 discarded, 1 available; reports: 1 cancelled, 1 scheduled."""
    enqueue_many(db, [JobBuilder("ok", {"n": i}).queue("mailers") for i in range(6)])
    enqueue_many(db, [JobBuilder("discard", {"n": i}).queue("mailers") for i in range(2)])
    enqueue(db, JobBuilder("cancel", {"post_id": 1}).queue("reports"))
    drain_jobs(db, registry)
    enqueue(db, JobBuilder("ok", {"n": 9}).queue("mailers"))
    enqueue(db, JobBuilder("ok", {}).queue("reports").schedule_in(timedelta(hours=1)))


def _read(db: Database, **options: object) -> StateCounts:
    with db.read() as conn:
        return read_state_counts(db, conn, **options)  # type: ignore[arg-type]


def test_fast_counts_equal_exact_counts_when_every_cell_is_small(db: Database) -> None:
    _history(db)
    exact = state_counts(db)
    assert exact["mailers"][JobState.COMPLETED] == 6
    assert exact["mailers"][JobState.DISCARDED] == 2
    assert exact["reports"][JobState.CANCELLED] == 1
    fast = _read(db, exact=False)
    assert fast.counts == exact
    assert fast.approximate == {}
    one = _read(db, queue="reports", exact=False)
    assert one.counts == {"reports": exact["reports"]}


def test_large_final_counts_are_flagged_as_estimates_on_postgresql(db: Database) -> None:
    _history(db)
    fast = _read(db, exact=False, exact_up_to=3)
    exact = state_counts(db)
    if db.is_postgresql:
        # Above the cap, completed is estimated from a sample (here the whole tiny table).
        assert fast.approximate == {"mailers": frozenset({JobState.COMPLETED})}
        assert fast.is_approximate("mailers", JobState.COMPLETED)
        assert not fast.is_approximate("mailers", JobState.DISCARDED)
        assert fast.counts["mailers"][JobState.COMPLETED] == 6  # a 100 % sample: exact
    else:  # SQLite always counts exactly
        assert fast.approximate == {}
    # Unfinished states and small final cells stay exact.
    for queue, counts in exact.items():
        for state, n in counts.items():
            if not fast.is_approximate(queue, state):
                assert fast.counts[queue][state] == n, (queue, state)


def test_queue_listing_and_overview_carry_the_estimate_flags(db: Database) -> None:
    _history(db)
    now = utcnow()
    exact_infos = {q.name: q for q in list_queues(db, now)}
    fast_infos = {q.name: q for q in list_queues(db, now, exact=False)}
    assert set(fast_infos) == set(exact_infos) == {"mailers", "reports"}
    for name, info in fast_infos.items():
        assert info.counts == exact_infos[name].counts
        assert info.approximate == frozenset()
        assert info.no_node == exact_infos[name].no_node
    view = overview(db, now, exact=False)
    assert view.counts == {name: info.counts for name, info in exact_infos.items()}
    assert view.totals[JobState.COMPLETED] == 6 and view.approximate == {}
