"""Workload 10: a rate-limited capacity group under a backlog (issue 24).

The shape the issue names: 100,000 due jobs over 1,000 keys in one group with ``rate_limit``
600/min and ``rate_limit_per_key`` 60/min (concurrency limits high enough never to bind).
Claims of 10 (``claim``, the public API) run at fixed claim times, window after window, until a
claim admits nothing: the starts admitted per minute against the limit (the fixed window makes
it exact; the figure proves it), and the claim's cost per job admitted. For comparison the same
claims from the same group with no rate set: the rate's cost is the ratio of the two.
Claims carry their time (``now``) so that three windows take seconds, not three minutes.
"""

from __future__ import annotations

import time
from datetime import timedelta

from bench.targets import analyze, checkpoint, reset
from bench.workloads.common import Context, Measurement, median
from kickside_engine import CapacityDeclaration, Database, JobBuilder, claim, enqueue_many
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, set_capacity

BACKLOG = 100_000
KEYS = 1_000
BATCH = 10
RATE = 600
WINDOWS = 3
GROUP = CapacityDeclaration(group="bench.rated", settings_namespace="bench.rated")
ACTOR = Actor("bench", "bench")


def _limits(db: Database, rate: str, per_key: str) -> None:
    set_capacity(
        db,
        GROUP.settings_namespace,
        global_limit=BACKLOG,
        per_key_limit=BACKLOG,
        rate_limit=rate,
        rate_limit_per_key=per_key,
        actor=ACTOR,
        now=utcnow(),
        create=True,
    )


def _claims(db: Database, at: object, *, rounds: int | None) -> list[tuple[float, int]]:
    """``(ms, jobs)`` per claim of ``BATCH`` at ``at``: until one admits nothing, or ``rounds``."""
    timings: list[tuple[float, int]] = []
    while rounds is None or len(timings) < rounds:
        started = time.perf_counter()
        batch = claim(db, queue="default", node="bench:rated", limit=BATCH, now=at)  # type: ignore[arg-type]
        timings.append(((time.perf_counter() - started) * 1000, len(batch)))
        if not batch:
            break
    return timings


def rate_limits(ctx: Context) -> Measurement:
    """Starts admitted per window against the rate, and the claim's cost beside no rate."""
    backlog, keys = ctx.count(BACKLOG, 2 * WINDOWS * RATE), ctx.count(KEYS, 20)
    db = ctx.target.open()
    try:
        reset(db)
        ctx.progress(f"rate_limits: {backlog} jobs over {keys} keys, {RATE}/min")
        template = JobBuilder("noop", {}, capacity=GROUP)
        enqueue_many(db, [template.concurrency_key(f"k{i % keys:05}") for i in range(backlog)])
        analyze(db)
        if db.is_postgresql:
            checkpoint(ctx.target.url, ctx.progress)
        _limits(db, f"{RATE}/min", f"{max(1, 2 * RATE // keys)}/min")
        start = utcnow().replace(second=0, microsecond=0) + timedelta(minutes=1)
        admitted: list[int] = []
        rated: list[tuple[float, int]] = []
        for window in range(WINDOWS):
            claims = _claims(db, start + timedelta(minutes=window, seconds=1), rounds=None)
            admitted.append(sum(n for _, n in claims))
            rated += [c for c in claims if c[1]]
        refused = _claims(db, start + timedelta(minutes=WINDOWS - 1, seconds=30), rounds=5)

        _limits(db, "none", "none")
        after = start + timedelta(minutes=WINDOWS)
        unlimited = _claims(db, after, rounds=len(rated))
        per_job = sum(ms for ms, _ in rated) / sum(n for _, n in rated)
        free_per_job = sum(ms for ms, _ in unlimited) / max(1, sum(n for _, n in unlimited))
        reset(db)
        return Measurement(
            workload="rate_limits",
            backend=ctx.target.backend,
            params={"backlog": backlog, "keys": keys, "batch": BATCH, "rate_per_min": RATE},
            metrics={
                "admitted_min_ratio": min(admitted) / RATE,
                "admitted_max_ratio": max(admitted) / RATE,
                "claim_ms_per_job": per_job,
                "unlimited_claim_ms_per_job": free_per_job,
                "cost_ratio": per_job / free_per_job,
                "refused_claim_ms": median([ms for ms, _ in refused]),
            },
            runs=[{"window": w, "admitted": n} for w, n in enumerate(admitted)],
        )
    finally:
        db.dispose()
