"""Workload 9: what a fair claim costs when one concurrency key's backlog fills the queue.

The shape issue 18 names: one key (``a``) with 100,000 due jobs ahead of 1,000 keys with one job
each, single-flight (one executing job per key). Claims of 10 (``claim``, the public API: the
keyless fast path, then the admission path) run until nothing is admissible: the first admits
``a``'s head and nine other keys, every later one has to get past ``a``'s whole backlog (held
by its executing job) to reach the keys behind it. Figures: each claim's time (the first, the
median, the slowest), the claim that finds nothing admissible (``a`` held, the other keys all
claimed), and, for comparison, a claim of 10 from a keyless backlog of the same size. Jobs
claimed must be exactly 1,001: ``a``'s head and every other key's job.
"""

from __future__ import annotations

import time

from bench.targets import analyze, checkpoint, reset
from bench.workloads.common import Context, Measurement, median, percentile
from kickside_engine import JobBuilder, claim, enqueue_fanout, enqueue_many

BACKLOG = 100_000
KEYS = 1_000
BATCH = 10
EMPTY_CLAIMS = 5


def _timed_claims(
    ctx: Context, db: object, *, until_empty: bool, rounds: int = 0
) -> list[tuple[float, int]]:
    """``(ms, jobs)`` per claim of ``BATCH``: until a claim returns nothing, or ``rounds``."""
    timings: list[tuple[float, int]] = []
    while True:
        started = time.perf_counter()
        batch = claim(db, queue="default", node="bench:keyed", limit=BATCH)  # type: ignore[arg-type]
        timings.append(((time.perf_counter() - started) * 1000, len(batch)))
        if (until_empty and not batch) or (not until_empty and len(timings) >= rounds):
            return timings


def keyed_claims(ctx: Context) -> Measurement:
    """Claim costs past one key's backlog, and beside a keyless backlog of the same size."""
    backlog, keys = ctx.count(BACKLOG, 100), ctx.count(KEYS, 10)
    db = ctx.target.open()
    try:
        reset(db)
        ctx.progress(f"keyed_claims: {backlog} jobs of key a, then {keys} keys with one job each")
        enqueue_fanout(db, JobBuilder("noop").concurrency_key("a"), [{}] * backlog)
        enqueue_many(db, [JobBuilder("noop", {}).concurrency_key(f"k{i:05}") for i in range(keys)])
        analyze(db)
        if db.is_postgresql:
            checkpoint(ctx.target.url, ctx.progress)
        claims = _timed_claims(ctx, db, until_empty=True)
        claimed = sum(n for _, n in claims)
        if claimed != keys + 1:
            raise RuntimeError(f"claimed {claimed} jobs, expected {keys + 1} (a's head + keys)")
        working = [ms for ms, n in claims if n]
        empty = [ms for ms, _ in _timed_claims(ctx, db, until_empty=False, rounds=EMPTY_CLAIMS)]

        reset(db)
        ctx.progress(f"keyed_claims: {backlog} keyless jobs, for comparison")
        enqueue_fanout(db, JobBuilder("noop"), [{}] * backlog)
        analyze(db)
        keyless = [ms for ms, _ in _timed_claims(ctx, db, until_empty=False, rounds=100)]
        reset(db)
        return Measurement(
            workload="keyed_claims",
            backend=ctx.target.backend,
            params={"backlog": backlog, "keys": keys, "batch": BATCH},
            metrics={
                "jobs_claimed": claimed,
                "claims": len(working),
                "first_claim_ms": working[0],
                "claim_p50_ms": median(working),
                "claim_max_ms": max(working),
                "empty_claim_ms": median(empty),
                "keyless_claim_p50_ms": median(keyless),
                "keyless_claim_p95_ms": percentile(keyless, 95),
            },
            runs=[{"ms": ms, "jobs": n} for ms, n in claims],
        )
    finally:
        db.dispose()
