"""Workload 11: workflows (issue 24), a 10,000-job fan-out/fan-in.

Each round inserts one workflow: ``start``, then 10,000 ``leaf`` jobs after it, then ``final``
after all of them. Claims of 10 (``claim``) and their settles (``record``, one transaction per
batch, as a pool's settle batch) run it to the end, timed call by call:

- the settle of ``start``, which releases the 10,000 leaves (the fan-out's release);
- every settle of a batch of leaves, each of which takes its leaves off ``final``'s pending
  count (the fan-in's hot row); the one that settles the last leaf releases ``final`` in the
  same transaction, so its duration is the release latency after the last upstream settles;
- for comparison, the same claims and settles of 10,000 plain jobs, and the insert of the
  workflow beside ``enqueue_many`` of as many plain jobs: workflow jobs' cost per job is the
  ratio.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bench.targets import analyze, checkpoint, reset
from bench.workloads.common import Context, Measurement, median, percentile
from kickside_engine import (
    ClaimedJob,
    Database,
    JobBuilder,
    JobState,
    Workflow,
    claim,
    enqueue_many,
    get_job,
    record,
)
from kickside_engine.clock import utcnow
from kickside_engine.lifecycle import ExecutionResult, ResultKind

LEAVES = 10_000
ROUNDS = 3
BATCH = 10
QUEUE = "flow"


def _settle(db: Database, batch: Sequence[ClaimedJob]) -> float:
    """Record every job of ``batch`` as done in one transaction; the call's ms."""
    finished = utcnow()
    started = time.perf_counter()
    record(db, [(c, ExecutionResult(ResultKind.DONE, finished, 0)) for c in batch])
    return (time.perf_counter() - started) * 1000


def _drain(db: Database) -> tuple[list[float], list[float], list[list[str]]]:
    """Claim and settle ``QUEUE`` in batches until it is empty: each claim's and each settle's
    ms, and the workers of each batch."""
    claims: list[float] = []
    settles: list[float] = []
    batches: list[list[str]] = []
    while True:
        started = time.perf_counter()
        batch = claim(db, queue=QUEUE, node="bench:flow", limit=BATCH)
        claims.append((time.perf_counter() - started) * 1000)
        if not batch:
            return claims[:-1], settles, batches
        settles.append(_settle(db, batch))
        batches.append([c.job.worker for c in batch])


def _workflow(n: int, leaves: int) -> Workflow:
    wf = Workflow(f"bench-flow-{n}")
    wf.add("start", JobBuilder("start", {}, queue=QUEUE))
    wf.add_many(
        "leaf", [JobBuilder("leaf", {"i": i}, queue=QUEUE) for i in range(leaves)], after=["start"]
    )
    wf.add("final", JobBuilder("final", {}, queue=QUEUE), after=["leaf"])
    return wf


def workflows(ctx: Context) -> Measurement:
    """The fan-out's and the fan-in's release, and workflow jobs' cost beside plain jobs'."""
    leaves, rounds = ctx.count(LEAVES, 50), max(1, ctx.count(ROUNDS, 1))
    db = ctx.target.open()
    try:
        reset(db)
        ctx.progress(f"workflows: {rounds} workflows of {leaves} jobs between start and final")
        runs = []
        fanout_ms: list[float] = []
        final_ms: list[float] = []
        leaf_settle_ms: list[float] = []
        flow_job_ms: list[float] = []
        plain_job_ms: list[float] = []
        insert_ms: list[float] = []
        plain_insert_ms: list[float] = []
        for n in range(rounds):
            wf = _workflow(n, leaves)
            started = time.perf_counter()
            inserted = wf.insert(db)
            insert_ms.append((time.perf_counter() - started) * 1000)
            analyze(db)
            if db.is_postgresql:
                checkpoint(ctx.target.url, ctx.progress)
            claims, settles, batches = _drain(db)
            final = get_job(db, inserted["final"])
            assert final is not None and final.state is JobState.COMPLETED, final
            # Batch 0 is start alone (the rest wait on it); the batch holding the last leaf
            # released final, which a later claim took on its own.
            last_leaf = max(i for i, workers in enumerate(batches) if "leaf" in workers)
            fanout_ms.append(settles[0])
            final_ms.append(settles[last_leaf])
            leaf_settle_ms += settles[1 : last_leaf + 1]
            flow_job_ms.append((sum(claims) + sum(settles)) / (leaves + 2))

            reset(db)
            plain_jobs = [JobBuilder("plain", {"i": i}, queue=QUEUE) for i in range(leaves + 2)]
            started = time.perf_counter()
            enqueue_many(db, plain_jobs)
            plain_insert_ms.append((time.perf_counter() - started) * 1000)
            analyze(db)
            if db.is_postgresql:
                checkpoint(ctx.target.url, ctx.progress)
            claims, settles, _ = _drain(db)
            plain_job_ms.append((sum(claims) + sum(settles)) / (leaves + 2))
            reset(db)
            runs.append(
                {
                    "fanout_release_ms": fanout_ms[-1],
                    "final_release_ms": final_ms[-1],
                    "workflow_ms_per_job": flow_job_ms[-1],
                    "plain_ms_per_job": plain_job_ms[-1],
                    "insert_ms": insert_ms[-1],
                    "plain_insert_ms": plain_insert_ms[-1],
                }
            )
        flow, plain = median(flow_job_ms), median(plain_job_ms)
        return Measurement(
            workload="workflows",
            backend=ctx.target.backend,
            params={"leaves": leaves, "rounds": rounds, "batch": BATCH},
            metrics={
                "final_release_ms": median(final_ms),
                "final_release_max_ms": max(final_ms),
                "leaf_settle_p50_ms": percentile(leaf_settle_ms, 50),
                "leaf_settle_p99_ms": percentile(leaf_settle_ms, 99),
                "fanout_release_ms": median(fanout_ms),
                "workflow_ms_per_job": flow,
                "plain_ms_per_job": plain,
                "cost_ratio": flow / plain,
                "insert_jobs_per_s": (leaves + 2) / (median(insert_ms) / 1000),
                "plain_insert_jobs_per_s": (leaves + 2) / (median(plain_insert_ms) / 1000),
            },
            runs=runs,
        )
    finally:
        db.dispose()
