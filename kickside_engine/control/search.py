"""Free-text search over a big job table in bounded steps.

No index serves a substring search of args and errors (see
:mod:`kickside_engine.control.queries`): a search that matches few jobs would read the whole
table before its first page is full. A trigram index would serve it, but every claim and settle
changes a job's state, so such an index is rewritten on the hot path: measured on 100,000 jobs,
it made state updates ten times slower. So a search reads the table in windows instead:
:func:`scan_jobs` examines at most ``scan_limit`` jobs (newest first, among those matching the
rest of the filter, which indexes do serve) and returns the matches among them; when the window
runs out before the page is full, the page says so and its cursor continues from where the
window stopped. A caller shows the matches as they arrive and asks for the next window, so no
single query reads more than ``scan_limit`` jobs, however rare the needle.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime

from sqlalchemy import func, or_, select, true

from kickside_engine.control.queries import (
    JobFilter,
    JobPage,
    _check_limit,
    _encode_cursor,
    _search_clause,
    filter_clause,
    older_than,
)
from kickside_engine.errors import InvalidArgumentError
from kickside_engine.store.database import Database
from kickside_engine.store.rows import job_from_row

#: Jobs one search query examines by default: about 50 ms on PostgreSQL (an idle 2-core machine).
SCAN_LIMIT = 15_000
MAX_SCAN_LIMIT = 1_000_000


@dataclasses.dataclass(frozen=True)
class ScanPage(JobPage):
    """A page of a bounded search.

    ``complete`` is False when the window of examined jobs ran out before ``limit`` matches
    were found: ``jobs`` holds the matches among them (perhaps none), ``next_cursor`` continues
    the search from the oldest job examined, and ``scanned_to`` is that job's insert time.
    """

    complete: bool = True
    scanned_to: datetime | None = None


def scan_jobs(
    db: Database,
    flt: JobFilter,
    *,
    limit: int = 50,
    cursor: str | None = None,
    scan_limit: int = SCAN_LIMIT,
) -> ScanPage:
    """Up to ``limit`` jobs matching ``flt``, newest first, examining at most ``scan_limit``.

    Without a search in ``flt`` this is the page of
    :func:`~kickside_engine.control.queries.list_jobs` (the rest of a filter is served by
    indexes). Cursors are those of ``list_jobs``.
    """
    _check_limit(limit)
    if isinstance(scan_limit, bool) or not isinstance(scan_limit, int):
        raise InvalidArgumentError(f"scan_limit must be a whole number, got {scan_limit!r}")
    if not 1 <= scan_limit <= MAX_SCAN_LIMIT:
        raise InvalidArgumentError(f"scan_limit must be 1..{MAX_SCAN_LIMIT}, got {scan_limit}")
    job = db.tables.job
    order = (job.c.inserted_at.desc(), job.c.id.desc())
    hit = _search_clause(db, flt.search) if flt.search else true()
    window = select(
        job, hit.label("hit"), func.row_number().over(order_by=order).label("rn")
    ).where(filter_clause(db, dataclasses.replace(flt, search=None)))
    if cursor is not None:
        window = window.where(older_than(db, cursor))
    scanned = window.order_by(*order).limit(scan_limit).subquery("scanned")
    # The matches, and the window's last job (its cursor continues the search), in order: the
    # outer LIMIT stops the scan as soon as the page is full.
    stmt = (
        select(scanned)
        .where(or_(scanned.c.hit, scanned.c.rn == scan_limit))
        .order_by(scanned.c.inserted_at.desc(), scanned.c.id.desc())
        .limit(limit + 1)
    )
    with db.read() as conn:
        if db.is_postgresql:
            conn.exec_driver_sql("SET LOCAL jit = off")  # compiling costs more than it saves
        rows = conn.execute(stmt).all()
    jobs = []
    for row in rows:
        if row.hit:
            jobs.append(job_from_row(row))
        if row.rn == scan_limit:  # the window ran out here
            if len(jobs) > limit:  # the last job examined is the first of the next page
                return ScanPage(jobs[:limit], _encode_cursor(jobs[limit - 1]))
            boundary = job_from_row(row)
            full = len(jobs) == limit
            return ScanPage(
                jobs,
                _encode_cursor(boundary),
                complete=full,
                scanned_to=None if full else boundary.inserted_at,
            )
    more = len(jobs) > limit
    jobs = jobs[:limit]
    return ScanPage(jobs, _encode_cursor(jobs[-1]) if more else None)
