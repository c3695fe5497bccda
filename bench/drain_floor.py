"""The fastest a drain can go on this machine with Kickside's writes and none of its code
(issue 21's drain lines).

``python -m bench.drain_floor [--mode io|sync] [--database-url URL] [--jobs N] [--rounds 3]
[--turns 1]`` enqueues no-op jobs with Kickside into a fresh schema, then drains them with raw
psycopg (asyncio, pipeline mode) and nothing else. Each turn is one round trip and one commit:
the jobs that ended since the last turn are settled (job row and run row, as a pool's settle
writes them) and new ones claimed (job row, ``FOR UPDATE SKIP LOCKED``, and the run row's
insert, as a pool's claim writes them): the writes of ``python -m bench.write_cost``'s
``base``, in two statements. As soon as a turn is back, the next starts (``--turns 2``: two
turns in flight, each on its own connection). The jobs:

- ``io`` (workload 10b, ``io_drain``): each claimed job is an asyncio task that awaits a 10 ms
  sleep, at most 200 at once; the Little's-law limit is 20,000 jobs/s;
- ``sync`` (workload 3, ``drain``): each claimed job is handed to one of 10 worker processes
  over a pipe, up to four in one message to an idle one, and each job's end comes back in a
  message of its own, as Kickside's process executors do (its crash isolation).

Prints jobs/s and CPU per job (this process and its workers; the server processes of its
connections), the median of the rounds and each round's figure. Run it beside ``python -m
bench.run --only io_drain`` (or ``drain``) with the peers: what the figures rule out is in
docs/about/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.cpu import process_tree_cpu_seconds
from bench.peers.runner import conninfo
from bench.targets import DEFAULT_POSTGRES_URL, postgresql_target
from kickside_engine import JobBuilder, enqueue_fanout

IO_SLOTS = 200
IO_SLEEP_S = 0.010
SYNC_WORKERS = 10
SYNC_BATCH = 4
#: Claimed jobs waiting for a place, at most, per place (a pool's prefetch buffer).
SYNC_AHEAD = 8
#: What tells a worker of ``sync`` to exit (a batch is a multiple of 16 bytes).
STOP = b"x"
#: The settle of the jobs that ended, then the claim, each with its run row's write.
SETTLE = (
    "WITH settled AS (UPDATE kickside_job SET state = 'completed', completed_at = now(), "
    "finalized_at = now(), lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, "
    "updated_at = now() WHERE id = ANY(%(ids)s) RETURNING id) "
    "UPDATE kickside_job_run SET finished_at = now(), duration_ms = 1, outcome = 'completed' "
    "WHERE finished_at IS NULL AND job_id IN (SELECT id FROM settled)"
)
CLAIM = (
    "WITH claimed AS (UPDATE kickside_job SET state = 'executing', attempt = attempt + 1, "
    "lease_owner = 'floor', lease_token = gen_random_uuid(), "
    "lease_expires_at = now() + interval '5 minutes', attempted_at = now(), updated_at = now() "
    "WHERE id IN (SELECT id FROM kickside_job WHERE state = 'available' AND queue = 'default' "
    "AND scheduled_at <= now() ORDER BY priority, scheduled_at, id LIMIT %(limit)s "
    "FOR UPDATE SKIP LOCKED) RETURNING id, attempt, queue, worker, lease_token, args) "
    "INSERT INTO kickside_job_run (job_id, attempt, queue, worker, node, lease_token, "
    "started_at) SELECT id, attempt, queue, worker, 'floor', lease_token, now() FROM claimed "
    "RETURNING job_id"
)


@dataclass
class Drain:
    """What a drain has: the jobs that ended and wait for their settle, and how many run."""

    jobs: int
    ended: list[uuid.UUID] = field(default_factory=list)
    running: int = 0
    settled: int = 0
    claimed: int = 0
    done: asyncio.Event = field(default_factory=asyncio.Event)


async def turn(conn: psycopg.AsyncConnection[Any], ended: list[uuid.UUID], limit: int) -> list[Any]:
    """Settle ``ended`` and claim up to ``limit`` jobs, in one round trip; the claimed ids."""
    async with conn.pipeline(), conn.transaction():
        if ended:
            await conn.execute(SETTLE, {"ids": ended})
        claimed = await conn.execute(CLAIM, {"limit": limit}) if limit else None
        rows = await claimed.fetchall() if claimed else []
    return [row[0] for row in rows]


async def turns(
    conn: psycopg.AsyncConnection[Any],
    drain: Drain,
    room: Callable[[], int],
    start: Callable[[list[uuid.UUID]], None],
    wake: asyncio.Event,
) -> None:
    """Run turns back to back on ``conn`` until every job has been settled."""
    while drain.settled < drain.jobs:
        ended, drain.ended = drain.ended, []
        limit = 0 if drain.claimed >= drain.jobs else room()
        if not ended and not limit:
            wake.clear()
            await wake.wait()
            continue
        drain.running += limit  # held for this turn's claims; given back below
        claimed = await turn(conn, ended, limit)
        drain.running -= limit - len(claimed)
        drain.settled += len(ended)
        drain.claimed += len(claimed)
        start(claimed)
    drain.done.set()
    wake.set()  # the other connection's turns see the end


async def io_jobs(conns: list[psycopg.AsyncConnection[Any]], jobs: int, most: int) -> None:
    """Drain ``jobs`` jobs of a 10 ms sleep each, at most :data:`IO_SLOTS` at once."""
    drain = Drain(jobs)
    wake = asyncio.Event()
    tasks: set[asyncio.Task[None]] = set()

    async def job(job_id: uuid.UUID) -> None:
        await asyncio.sleep(IO_SLEEP_S)
        drain.running -= 1
        drain.ended.append(job_id)
        wake.set()

    def start(claimed: list[uuid.UUID]) -> None:
        for job_id in claimed:
            task = asyncio.create_task(job(job_id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def room() -> int:
        return min(most, IO_SLOTS - drain.running)

    await asyncio.gather(*(turns(c, drain, room, start, wake) for c in conns))


def _worker(jobs_in: int, ends_out: int) -> None:
    """A worker process of ``sync``: run each job handed over (a no-op call) and write its id
    back as it ends, one write per job."""

    def noop(_args: Any) -> None:
        return None

    while (batch := os.read(jobs_in, 4096)) != STOP:
        for i in range(0, len(batch), 16):
            noop(None)
            os.write(ends_out, batch[i : i + 16])


async def sync_jobs(conns: list[psycopg.AsyncConnection[Any]], jobs: int, most: int) -> None:
    """Drain ``jobs`` no-op jobs through :data:`SYNC_WORKERS` worker processes.

    The pipes are raw (``os.pipe``): a batch of ids in one write to an idle worker (which
    reads it whole), a 16-byte id back per job; the ends of all workers are read in bulk.
    """
    drain = Drain(jobs)
    wake = asyncio.Event()
    loop = asyncio.get_running_loop()
    ctx = mp.get_context("fork")  # the workers inherit their pipes' descriptors
    to_workers: list[int] = []
    from_workers: list[int] = []
    workers = []
    for _ in range(SYNC_WORKERS):
        jobs_r, jobs_w = os.pipe()
        ends_r, ends_w = os.pipe()
        proc = ctx.Process(target=_worker, args=(jobs_r, ends_w), daemon=True)
        proc.start()
        os.close(jobs_r)
        os.close(ends_w)
        to_workers.append(jobs_w)
        from_workers.append(ends_r)
        workers.append(proc)
    held = dict.fromkeys(range(SYNC_WORKERS), 0)
    waiting: list[uuid.UUID] = []
    partial = dict.fromkeys(range(SYNC_WORKERS), b"")

    def hand_out() -> None:
        for w, n in held.items():
            if n or not waiting:
                continue
            batch, waiting[:SYNC_BATCH] = waiting[:SYNC_BATCH], []
            held[w] = len(batch)
            os.write(to_workers[w], b"".join(j.bytes for j in batch))

    def ended(w: int) -> None:
        data = partial[w] + os.read(from_workers[w], 4096)
        whole = len(data) - len(data) % 16
        partial[w] = data[whole:]
        for i in range(0, whole, 16):
            drain.ended.append(uuid.UUID(bytes=data[i : i + 16]))
        held[w] -= whole // 16
        drain.running -= whole // 16
        hand_out()
        wake.set()

    for w, fd in enumerate(from_workers):
        loop.add_reader(fd, ended, w)

    def start(claimed: list[uuid.UUID]) -> None:
        waiting.extend(claimed)
        hand_out()

    def room() -> int:
        return min(most, SYNC_WORKERS * (SYNC_BATCH + SYNC_AHEAD) - drain.running)

    try:
        await asyncio.gather(*(turns(c, drain, room, start, wake) for c in conns))
    finally:
        for fd in from_workers:
            loop.remove_reader(fd)
        for fd in to_workers:
            os.write(fd, STOP)
        for proc in workers:
            proc.join(5)
        for fd in to_workers + from_workers:
            os.close(fd)


async def measure(
    url: str, schema: str, mode: str, jobs: int, connections: int, most: int
) -> dict[str, float]:
    """One drain: jobs/s and CPU µs per job (this process tree; the connections' servers)."""
    options = f"-c search_path={schema} -c enable_seqscan=off"
    conns = [
        await psycopg.AsyncConnection.connect(conninfo(url), options=options, autocommit=True)
        for _ in range(connections)
    ]
    try:
        backends = []
        for c in conns:
            row = await (await c.execute("SELECT pg_backend_pid()")).fetchone()
            assert row is not None
            if Path(f"/proc/{row[0]}/stat").exists():
                backends.append(row[0])

        def server_cpu() -> float:
            return sum(process_tree_cpu_seconds(pid) for pid in backends)

        cpu0, server0 = process_tree_cpu_seconds(os.getpid()), server_cpu()
        started = time.perf_counter()
        await (io_jobs if mode == "io" else sync_jobs)(conns, jobs, most)
        elapsed = time.perf_counter() - started
        cpu, server = process_tree_cpu_seconds(os.getpid()) - cpu0, server_cpu() - server0
        await _check(conns[0], jobs)
    finally:
        for c in conns:
            await c.close()
    return {
        "jobs_per_s": jobs / elapsed,
        "client_cpu_us": cpu / jobs * 1e6,
        "server_cpu_us": server / jobs * 1e6 if backends else float("nan"),
    }


async def _check(conn: psycopg.AsyncConnection[Any], jobs: int) -> None:
    """Every job completed, with one run row, finished: the floor made the writes it claims."""
    cur = await conn.execute(
        "SELECT (SELECT count(*) FROM kickside_job WHERE state = 'completed'), "
        "(SELECT count(*) FROM kickside_job_run WHERE outcome = 'completed' "
        "AND finished_at IS NOT NULL), (SELECT count(*) FROM kickside_job_run)"
    )
    row = await cur.fetchone()
    if row != (jobs, jobs, jobs):
        raise RuntimeError(f"expected {jobs} completed jobs and finished runs, found {row}")


def round_(url: str, mode: str, jobs: int, connections: int, most: int) -> dict[str, float]:
    """One round in a fresh schema."""
    with postgresql_target(url, f"bench_drain_floor_{os.getpid()}") as target:
        db = target.open()
        try:
            enqueue_fanout(db, JobBuilder("noop"), [{"i": i} for i in range(jobs)])
        finally:
            db.dispose()
        assert target.schema is not None
        return asyncio.run(measure(url, target.schema, mode, jobs, connections, most))


def main(argv: list[str] | None = None) -> int:
    """Drain ``--rounds`` times; print each round and the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.drain_floor")
    parser.add_argument("--mode", choices=("io", "sync"), default="io")
    parser.add_argument("--database-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--jobs", type=int, default=None, help="default: 40,000 (io), 20,000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, choices=(1, 2), default=1)
    parser.add_argument(
        "--most-per-turn", type=int, default=1_000_000, help="claim at most this many a turn"
    )
    args = parser.parse_args(argv)
    jobs = args.jobs or (40_000 if args.mode == "io" else 20_000)
    rounds = [
        round_(args.database_url, args.mode, jobs, args.turns, args.most_per_turn)
        for _ in range(args.rounds)
    ]
    what = (
        f"{IO_SLOTS} tasks of a {IO_SLEEP_S * 1000:.0f} ms sleep"
        if args.mode == "io"
        else f"{SYNC_WORKERS} worker processes, batches of {SYNC_BATCH}"
    )
    most = "" if args.most_per_turn >= jobs else f", at most {args.most_per_turn} claimed a turn"
    print(f"drain floor, {args.mode}: {jobs} jobs, {what}, {args.turns} turn(s) in flight{most}")
    for name in rounds[0]:
        each = ", ".join(f"{r[name]:,.1f}" for r in rounds)
        print(f"  {name}: {statistics.median(r[name] for r in rounds):,.1f} ({each})")
    if args.mode == "io":
        share = statistics.median(r["jobs_per_s"] for r in rounds) / (IO_SLOTS / IO_SLEEP_S)
        print(f"  share of the Little's-law limit: {share:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
