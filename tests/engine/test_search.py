"""A search reads the table in bounded windows and still finds every match exactly once."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from kickside_engine import Database, InvalidArgumentError, JobBuilder, JobState, enqueue
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, JobFilter, cancel_job, count_jobs, list_jobs
from kickside_engine.control.search import ScanPage, scan_jobs

NEEDLE = "needle-42"
MATCHING = (2, 11, 12, 27)


def _jobs(db: Database) -> dict[int, uuid.UUID]:
    """30 jobs inserted a second apart (job 29 newest); the MATCHING ones carry the needle."""
    base = utcnow() - timedelta(minutes=5)
    ids = {}
    for i in range(30):
        note = f"has {NEEDLE.upper()} inside" if i in MATCHING else f"plain {i}"
        ids[i] = enqueue(
            db, JobBuilder("ok", {"i": i, "note": note}), now=base + timedelta(seconds=i)
        ).id
    return ids


def _pages(db: Database, flt: JobFilter, *, limit: int, scan_limit: int) -> list[ScanPage]:
    pages, cursor = [], None
    while True:
        page = scan_jobs(db, flt, limit=limit, cursor=cursor, scan_limit=scan_limit)
        pages.append(page)
        assert len(page.jobs) <= limit
        if page.next_cursor is None:
            return pages
        assert len(pages) < 50, "the search never ended"
        cursor = page.next_cursor


def test_small_windows_find_every_match_once_newest_first(db: Database) -> None:
    ids = _jobs(db)
    pages = _pages(db, JobFilter(search=NEEDLE), limit=2, scan_limit=5)
    found = [j.id for p in pages for j in p.jobs]
    assert found == [ids[i] for i in sorted(MATCHING, reverse=True)]
    partial = [p for p in pages if not p.complete]
    assert partial, "a window of 5 jobs cannot fill every page"
    assert all(p.scanned_to is not None and p.next_cursor for p in partial)
    assert all(p.scanned_to is None for p in pages if p.complete)


def test_a_page_that_fills_inside_its_window_continues_after_its_last_job(db: Database) -> None:
    ids = _jobs(db)
    pages = _pages(db, JobFilter(search=NEEDLE), limit=2, scan_limit=30)
    assert [[j.id for j in p.jobs] for p in pages] == [[ids[27], ids[12]], [ids[11], ids[2]]]
    assert all(p.complete for p in pages)


def test_the_window_counts_only_jobs_matching_the_rest_of_the_filter(db: Database) -> None:
    ids = _jobs(db)
    actor = Actor("oncall", "ops")
    for i in range(13, 30):  # the newest 17 jobs leave the available state
        cancel_job(db, ids[i], actor, utcnow())
    flt = JobFilter(states=(JobState.AVAILABLE,), search=NEEDLE)
    # A window of 3 available jobs from the top reaches job 10: both 12 and 11 are in it.
    first = scan_jobs(db, flt, limit=5, scan_limit=3)
    assert [j.id for j in first.jobs] == [ids[12], ids[11]]
    assert not first.complete
    found = [j.id for p in _pages(db, flt, limit=5, scan_limit=3) for j in p.jobs]
    assert found == [ids[12], ids[11], ids[2]]


def test_without_a_search_a_scan_is_the_listing_page(db: Database) -> None:
    _jobs(db)
    page = scan_jobs(db, JobFilter(), limit=7, scan_limit=7)
    listed = list_jobs(db, JobFilter(), limit=7)
    assert [j.id for j in page.jobs] == [j.id for j in listed.jobs]
    assert page.complete


def test_keyset_pages_list_every_job_once(db: Database) -> None:
    ids = _jobs(db)
    seen, cursor = [], None
    while True:
        page = list_jobs(db, JobFilter(), limit=7, cursor=cursor)
        seen += [j.id for j in page.jobs]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [ids[i] for i in reversed(range(30))]


def test_counts_can_stop_at_a_limit(db: Database) -> None:
    _jobs(db)
    assert count_jobs(db, JobFilter()) == 30
    assert count_jobs(db, JobFilter(), limit=10) == 10
    assert count_jobs(db, JobFilter(search=NEEDLE), limit=100) == len(MATCHING)
    with pytest.raises(InvalidArgumentError, match="limit"):
        count_jobs(db, JobFilter(), limit=0)


@pytest.mark.parametrize("scan_limit", [0, -1, True, 2_000_000])
def test_a_bad_scan_limit_is_refused(db: Database, scan_limit: int) -> None:
    with pytest.raises(InvalidArgumentError, match="scan_limit"):
        scan_jobs(db, JobFilter(search="x"), limit=5, scan_limit=scan_limit)
