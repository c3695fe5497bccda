"""Every workload the runner knows, in the order it runs them, with the backends it runs on.

Workloads that use the backend's shared pool process (``uses_pool``) run one after another;
the runner stops that pool before any other workload, which must be alone with the database.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bench.nodes import MULTI_JOBS
from bench.workloads.async_drains import (
    ASYNC_DRAIN_JOBS,
    IO_DRAIN_JOBS,
    async_drain,
    async_latency,
    io_drain,
)
from bench.workloads.common import Context, Measurement, scaled
from bench.workloads.dashboard import dashboard
from bench.workloads.dispatch import dispatch
from bench.workloads.drain import DRAIN_JOBS, drain
from bench.workloads.enqueue import (
    BULK_JOBS,
    SINGLE_JOBS,
    bulk_enqueue,
    bulk_enqueue_builders,
    bulk_enqueue_copy,
    single_enqueue,
)
from bench.workloads.history import CLAIMED_JOBS, LARGE_HISTORY, SMALL_HISTORY, history_scale
from bench.workloads.keyed import keyed_claims
from bench.workloads.latency import LATENCY_JOBS, LATENCY_MINIMUM, latency, latency_inprocess
from bench.workloads.multinode import multi_node
from bench.workloads.otel_cost import otel_cost
from bench.workloads.rate_limits import rate_limits
from bench.workloads.work_per_job import WORK_JOBS, work_per_job
from bench.workloads.workflows import workflows

BOTH = ("postgresql", "sqlite")
POSTGRESQL = ("postgresql",)
SQLITE = ("sqlite",)


@dataclass(frozen=True)
class Workload:
    """A named workload: what it measures, where it runs, and the function that runs it."""

    name: str
    title: str
    backends: tuple[str, ...]
    run: Callable[[Context], Measurement]
    uses_pool: bool = False


WORKLOADS: tuple[Workload, ...] = (
    Workload("bulk_enqueue", "1 bulk enqueue (enqueue_fanout)", BOTH, bulk_enqueue),
    Workload(
        "bulk_enqueue_builders",
        "1c bulk enqueue of builders (enqueue_many)",
        BOTH,
        bulk_enqueue_builders,
    ),
    Workload(
        "bulk_enqueue_copy",
        "1b bulk enqueue, raw COPY of prebuilt rows",
        POSTGRESQL,
        bulk_enqueue_copy,
    ),
    Workload("single_enqueue", "2 single enqueue, one commit each", BOTH, single_enqueue),
    Workload("drain", "3 drain, one pool, concurrency 10", BOTH, drain, uses_pool=True),
    Workload(
        "dispatch", "3b dispatch: supervisor to executor process and back", ("sqlite",), dispatch
    ),
    Workload(
        "latency",
        "4 enqueue-to-start latency, pool in its own process",
        BOTH,
        latency,
        uses_pool=True,
    ),
    Workload(
        "latency_inprocess", "4b latency, pool in the enqueuing process", BOTH, latency_inprocess
    ),
    Workload("async_drain", "10 async drain: async no-op jobs, concurrency 10", BOTH, async_drain),
    Workload("io_drain", "10b I/O-bound async drain: 10 ms sleeps, 200 slots", BOTH, io_drain),
    Workload(
        "async_latency",
        "10c async enqueue-to-start latency, pool in its own process",
        POSTGRESQL,
        async_latency,
    ),
    Workload(
        "history_scale", "5 claim-and-complete cost vs history size", POSTGRESQL, history_scale
    ),
    Workload(
        "multi_node", "6 multi-node: 1, 2 and 4 pool processes draining", POSTGRESQL, multi_node
    ),
    Workload("dashboard", "7 dashboard refreshes and memory at 1M jobs", POSTGRESQL, dashboard),
    Workload(
        "keyed_claims",
        "9 fair claims: one key's 100,000-job backlog beside 1,000 keys",
        BOTH,
        keyed_claims,
    ),
    Workload(
        "rate_limits",
        "10 rate limits: 600/min over a 100,000-job backlog of 1,000 keys",
        BOTH,
        rate_limits,
    ),
    Workload(
        "workflows",
        "11 workflows: a 10,000-job fan-out/fan-in, releases and cost per job",
        BOTH,
        workflows,
    ),
    Workload(
        "otel_cost",
        "22 OpenTelemetry: drains and enqueues traced and untraced, alternately",
        BOTH,
        otel_cost,
    ),
    Workload(
        "work_per_job",
        "26 work per job: statements, rows written and commits of enqueue, claim and settle",
        SQLITE,
        work_per_job,
    ),
)


def by_name(names: list[str] | None) -> list[Workload]:
    """The workloads named (all when ``names`` is empty), in catalog order.

    Raises ``ValueError`` naming any unknown workload.
    """
    if not names:
        return list(WORKLOADS)
    known = {w.name for w in WORKLOADS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"unknown workload {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return [w for w in WORKLOADS if w.name in names]


#: The workloads the peers run too: their job counts before ``--quick`` scaling, and floors.
PEER_WORKLOADS: dict[str, tuple[int, int]] = {
    "bulk_enqueue": (BULK_JOBS, 10),
    "single_enqueue": (SINGLE_JOBS, 10),
    "drain": (DRAIN_JOBS, 10),
    "latency": (LATENCY_JOBS, LATENCY_MINIMUM),
    "history_scale": (CLAIMED_JOBS, 10),
    "multi_node": (MULTI_JOBS, 10),
    "async_drain": (ASYNC_DRAIN_JOBS, 10),
    "io_drain": (IO_DRAIN_JOBS, 200),
    "async_latency": (LATENCY_JOBS, LATENCY_MINIMUM),
    "work_per_job": (WORK_JOBS, 10),
}


def peer_counts(workloads: list[Workload], scale: float) -> dict[str, int]:
    """The job count of each selected workload the peers run, scaled as Kickside's."""
    counts = {}
    for workload in workloads:
        if workload.name in PEER_WORKLOADS:
            full, minimum = PEER_WORKLOADS[workload.name]
            counts[workload.name] = scaled(full, scale, minimum)
    return counts


def history_sizes(scale: float) -> tuple[int, int]:
    """history_scale's small and large history, scaled as Kickside's (for the peers)."""
    return scaled(SMALL_HISTORY, scale), scaled(LARGE_HISTORY, scale)
