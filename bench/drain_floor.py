"""The fastest a drain can go on this machine with Kickside's writes and none of its code
(issue 21's drain lines, issue 26's SQLite drain).

``python -m bench.drain_floor [--backend postgresql|sqlite] [--mode io|sync] [--jobs N]
[--rounds 3] [--turns 1] [--most-per-turn N] [--database-url URL]`` enqueues no-op jobs with
Kickside into a fresh schema (or SQLite file), then drains them with the raw driver and
nothing else. Each turn settles the jobs that ended since the last one (job row and run row,
as a pool's settle writes them) and claims new ones (job row, and the run row's insert, as a
pool's claim writes them): the writes of ``python -m bench.write_cost``'s ``base``, in one
transaction.

- PostgreSQL: psycopg, asyncio, pipeline mode; a turn is one round trip and one commit (the
  claim ``FOR UPDATE SKIP LOCKED``). As soon as a turn is back the next starts; ``--turns N``
  keeps N in flight, each on its own connection.
- SQLite (WAL, synchronous NORMAL, as Kickside's default): ``sqlite3`` on a thread of its own,
  ``BEGIN IMMEDIATE``, the statements of ``bench.write_cost``; one turn at a time (one writer).

``--most-per-turn`` caps what a turn claims. ``--writes minimal`` (PostgreSQL) drains a queue
that writes the least any durable queue can instead: a three-column row with one partial index,
claimed with ``FOR UPDATE SKIP LOCKED`` and deleted when it ends, no run history; the floor of
the machine itself, whatever a queue keeps. ``--writes lean`` (PostgreSQL) drains with the least
Kickside could write and still keep its lease, its completed state and a run row per attempt:
each run row written once, at the settle, and without the indexes that no claim or settle reads
(the listings' ``inserted_at``, ``worker``/``state``, the run table's ``finished_at``).
``--writes lease_only`` (PostgreSQL) keeps Kickside's job row and lease and writes no run
history at all. The jobs:

- ``io`` (workload 10b, ``io_drain``): each claimed job is an asyncio task that awaits a 10 ms
  sleep, at most 200 at once; the Little's-law limit is 20,000 jobs/s;
- ``sync`` (workloads 3 and 8, ``drain``): each claimed job is handed to one of 10 worker
  processes over a pipe, up to four in one write to an idle one, and each job's end comes back
  in a write of its own, as Kickside's process executors do (its crash isolation).

Prints jobs/s and CPU µs per job (this process and its workers; on PostgreSQL also the server
processes of its connections), the median of the rounds and each round's figure. The tool
checks that every job completed with one finished run. Run it beside ``python -m bench.run``
with the peers: what the figures rule out is in docs/about/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sqlite3
import statistics
import struct
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.cpu import process_tree_cpu_seconds
from bench.peers.runner import conninfo
from bench.targets import DEFAULT_POSTGRES_URL, Target, postgresql_target, sqlite_target
from bench.write_cost import POSTGRESQL_TOKEN, SQLITE, claim_sql, writes_sql
from kickside_engine import JobBuilder, enqueue_fanout

IO_SLOTS = 200
IO_SLEEP_S = 0.010
SYNC_WORKERS = 10
SYNC_BATCH = 4
#: Claimed jobs waiting for a place, at most, per place (a pool's prefetch buffer).
SYNC_AHEAD = 8
#: What tells a worker of ``sync`` to exit (a batch is a multiple of 4 bytes).
STOP = b"x"
#: A job crosses the workers' pipes as its index in the drain's list of claimed ids.
HANDLE = struct.Struct("=I")
#: PostgreSQL: the settle of the jobs that ended, then the claim, each with its run row.
#: What the settle sets on a job row that completed.
COMPLETED = (
    "state = 'completed', completed_at = now(), finalized_at = now(), lease_owner = NULL, "
    "lease_token = NULL, lease_expires_at = NULL, updated_at = now()"
)
#: The settle's job update alone (``--writes lease_only`` keeps no run history).
SETTLE_JOBS = f"UPDATE kickside_job SET {COMPLETED} WHERE id = ANY(%(ids)s) RETURNING id"
SETTLE = (
    f"WITH settled AS ({SETTLE_JOBS}) "
    "UPDATE kickside_job_run SET finished_at = now(), duration_ms = 1, outcome = 'completed' "
    "WHERE finished_at IS NULL AND job_id IN (SELECT id FROM settled)"
)
#: The claim's job update alone (``--writes lean`` writes no run row at the claim).
CLAIM_JOBS = (
    "UPDATE kickside_job SET state = 'executing', attempt = attempt + 1, "
    f"lease_owner = 'floor', lease_token = {POSTGRESQL_TOKEN}, "
    "lease_expires_at = now() + interval '5 minutes', attempted_at = now(), updated_at = now() "
    "WHERE id IN (SELECT id FROM kickside_job WHERE state = 'available' AND queue = 'default' "
    "AND scheduled_at <= now() ORDER BY priority, scheduled_at, id LIMIT %(limit)s "
    "FOR UPDATE SKIP LOCKED) RETURNING id, attempt, queue, worker, lease_token, args"
)
CLAIM = (
    f"WITH claimed AS ({CLAIM_JOBS}) "
    "INSERT INTO kickside_job_run (job_id, attempt, queue, worker, node, lease_token, "
    "started_at) SELECT id, attempt, queue, worker, 'floor', lease_token, now() FROM claimed "
    "RETURNING job_id"
)
CHECK = (
    "SELECT (SELECT count(*) FROM kickside_job WHERE state = 'completed'), "
    "(SELECT count(*) FROM kickside_job_run WHERE outcome = 'completed' "
    "AND finished_at IS NOT NULL), (SELECT count(*) FROM kickside_job_run)"
)

#: ``--writes minimal``: the least a durable queue writes (no lease, no history).
MINIMAL_SETUP = (
    "CREATE TABLE floor_minimal (id bigserial PRIMARY KEY, state text NOT NULL, "
    "args jsonb NOT NULL DEFAULT '{}')",
    "CREATE INDEX floor_minimal_queued ON floor_minimal (id) WHERE state = 'queued'",
    "INSERT INTO floor_minimal (state) SELECT 'queued' FROM generate_series(1, %(jobs)s)",
    "ANALYZE floor_minimal",
)
MINIMAL_SETTLE = "DELETE FROM floor_minimal WHERE id = ANY(%(ids)s)"
MINIMAL_CLAIM = (
    "UPDATE floor_minimal SET state = 'picked' WHERE id IN (SELECT id FROM floor_minimal "
    "WHERE state = 'queued' ORDER BY id LIMIT %(limit)s FOR UPDATE SKIP LOCKED) RETURNING id"
)
MINIMAL_CHECK = "SELECT count(*), count(*), 0 FROM floor_minimal"

#: ``--writes lease_only``: Kickside's job row, its indexes and its lease, no run history.
LEASE_ONLY_CHECK = (
    "SELECT (SELECT count(*) FROM kickside_job WHERE state = 'completed'), 0, "
    "(SELECT count(*) FROM kickside_job_run)"
)

#: ``--writes lean``: the least Kickside could write and still keep what it promises (a lease,
#: a completed state, a run row per attempt): each run row written once, whole, at the settle
#: (from the job row's lease and start, read as they were before the settle), and the indexes
#: no claim or settle needs dropped (listings' ``inserted_at``, ``worker``/``state``, the run
#: table's ``finished_at``).
LEAN_CHANGES = (
    "DROP INDEX ix_kickside_job_inserted_at",
    "DROP INDEX ix_kickside_job_worker_state",
    "DROP INDEX ix_kickside_job_run_finished_at",
)
LEAN_SETTLE = (
    f"WITH settled AS (UPDATE kickside_job j SET {COMPLETED} "
    "FROM kickside_job was WHERE was.id = j.id AND j.id = ANY(%(ids)s) "
    "RETURNING j.id, j.attempt, j.queue, j.worker, was.lease_owner, was.lease_token, "
    "was.attempted_at) "
    "INSERT INTO kickside_job_run (job_id, attempt, queue, worker, node, lease_token, "
    "started_at, finished_at, duration_ms, outcome) SELECT id, attempt, queue, worker, "
    "lease_owner, lease_token, attempted_at, now(), 1, 'completed' FROM settled"
)


@dataclass(frozen=True)
class Writes:
    """What a turn writes on PostgreSQL, and what the drain must have left behind."""

    settle: str
    claim: str
    check: str
    #: ``CHECK``'s row after ``jobs`` were drained.
    left: Callable[[int], tuple[int, int, int]]
    #: Schema changes made once the jobs are enqueued, before the drain.
    changes: tuple[str, ...] = ()


WRITES = {
    "kickside": Writes(SETTLE, CLAIM, CHECK, lambda jobs: (jobs, jobs, jobs)),
    "minimal": Writes(MINIMAL_SETTLE, MINIMAL_CLAIM, MINIMAL_CHECK, lambda _jobs: (0, 0, 0)),
    "lean": Writes(LEAN_SETTLE, CLAIM_JOBS, CHECK, lambda jobs: (jobs, jobs, jobs), LEAN_CHANGES),
    "lease_only": Writes(SETTLE_JOBS, CLAIM_JOBS, LEASE_ONLY_CHECK, lambda jobs: (jobs, 0, 0)),
}

#: A turn: settle these ended jobs' ids, claim up to this many; the claimed ids.
Turn = Callable[[list[Any], int], Awaitable[list[Any]]]


@dataclass
class Drain:
    """What a drain has: the jobs that ended and wait for their settle, and how many run."""

    jobs: int
    ended: list[Any] = field(default_factory=list)
    running: int = 0
    settled: int = 0
    claimed: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event)


async def turns(
    turn: Turn, drain: Drain, room: Callable[[], int], start: Callable[[list[Any]], None]
) -> None:
    """Run turns back to back until every job has been settled."""
    while drain.settled < drain.jobs:
        ended, drain.ended = drain.ended, []
        limit = 0 if drain.claimed >= drain.jobs else room()
        if not ended and not limit:
            drain.wake.clear()
            await drain.wake.wait()
            continue
        drain.running += limit  # held for this turn's claims; given back below
        claimed = await turn(ended, limit)
        drain.running -= limit - len(claimed)
        drain.settled += len(ended)
        drain.claimed += len(claimed)
        start(claimed)
    drain.wake.set()  # the other turns see the end


async def io_jobs(turners: list[Turn], jobs: int, most: int) -> None:
    """Drain ``jobs`` jobs of a 10 ms sleep each, at most :data:`IO_SLOTS` at once."""
    drain = Drain(jobs)
    tasks: set[asyncio.Task[None]] = set()

    async def job(job_id: Any) -> None:
        await asyncio.sleep(IO_SLEEP_S)
        drain.running -= 1
        drain.ended.append(job_id)
        drain.wake.set()

    def start(claimed: list[Any]) -> None:
        for job_id in claimed:
            task = asyncio.create_task(job(job_id))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    def room() -> int:
        return min(most, IO_SLOTS - drain.running)

    await asyncio.gather(*(turns(t, drain, room, start) for t in turners))


def _worker(jobs_in: int, ends_out: int) -> None:
    """A worker process of ``sync``: run each job handed over (a no-op call) and write its
    handle back as it ends, one write per job."""

    def noop(_args: Any) -> None:
        return None

    size = HANDLE.size
    while (batch := os.read(jobs_in, 4096)) != STOP:
        for i in range(0, len(batch), size):
            noop(None)
            os.write(ends_out, batch[i : i + size])


async def sync_jobs(turners: list[Turn], jobs: int, most: int) -> None:
    """Drain ``jobs`` no-op jobs through :data:`SYNC_WORKERS` worker processes.

    The pipes are raw (``os.pipe``): a batch of handles in one write to an idle worker (which
    reads it whole), a handle back per job; a worker's ends are read in bulk.
    """
    drain = Drain(jobs)
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
    ids: list[Any] = []
    waiting: list[int] = []
    partial = dict.fromkeys(range(SYNC_WORKERS), b"")
    size = HANDLE.size

    def hand_out() -> None:
        for w, n in held.items():
            if n or not waiting:
                continue
            batch, waiting[:SYNC_BATCH] = waiting[:SYNC_BATCH], []
            held[w] = len(batch)
            os.write(to_workers[w], b"".join(HANDLE.pack(h) for h in batch))

    def ended(w: int) -> None:
        data = partial[w] + os.read(from_workers[w], 4096)
        whole = len(data) - len(data) % size
        partial[w] = data[whole:]
        drain.ended.extend(ids[h] for (h,) in HANDLE.iter_unpack(data[:whole]))
        held[w] -= whole // size
        drain.running -= whole // size
        hand_out()
        drain.wake.set()

    for w, fd in enumerate(from_workers):
        loop.add_reader(fd, ended, w)

    def start(claimed: list[Any]) -> None:
        waiting.extend(range(len(ids), len(ids) + len(claimed)))
        ids.extend(claimed)
        hand_out()

    def room() -> int:
        return min(most, SYNC_WORKERS * (SYNC_BATCH + SYNC_AHEAD) - drain.running)

    try:
        await asyncio.gather(*(turns(t, drain, room, start) for t in turners))
    finally:
        for fd in from_workers:
            loop.remove_reader(fd)
        for fd in to_workers:
            os.write(fd, STOP)
        for proc in workers:
            proc.join(5)
        for fd in to_workers + from_workers:
            os.close(fd)


def postgresql_turn(conn: psycopg.AsyncConnection[Any], writes: Writes) -> Turn:
    """Turns on ``conn`` (autocommit): one round trip, one commit."""

    async def turn(ended: list[Any], limit: int) -> list[Any]:
        async with conn.pipeline(), conn.transaction():
            if ended:
                await conn.execute(writes.settle, {"ids": ended})
            claimed = await conn.execute(writes.claim, {"limit": limit}) if limit else None
            rows = await claimed.fetchall() if claimed else []
        return [row[0] for row in rows]

    return turn


def sqlite_turn(conn: sqlite3.Connection, thread: ThreadPoolExecutor) -> Turn:
    """Turns on ``conn``, each one transaction on ``thread`` (the loop goes on meanwhile)."""
    d = SQLITE
    now = d["now"]

    def run(ended: list[Any], limit: int) -> list[Any]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            if ended:
                writes = writes_sql(d, ",".join("?" * len(ended)))
                conn.execute(writes["settle"], (now, now, now, *ended))
                conn.execute(writes["finish_runs"], (now, *ended))
            claimed: list[Any] = []
            if limit:
                rows = conn.execute(claim_sql(d, limit), (now, now, now, d["due"]))
                claimed = [row[0] for row in rows.fetchall()]
            if claimed:
                writes = writes_sql(d, ",".join("?" * len(claimed)))
                conn.execute(writes["start_runs"], (now, *claimed))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return claimed

    async def turn(ended: list[Any], limit: int) -> list[Any]:
        return await asyncio.get_running_loop().run_in_executor(thread, run, ended, limit)

    return turn


@dataclass
class Measured:
    """A drain's wall time and CPU seconds (``server``: PostgreSQL's, else None)."""

    seconds: float
    client: float
    server: float | None


async def drain_postgresql(
    target: Target, mode: str, jobs: int, n: int, most: int, writes: Writes
) -> Measured:
    """Drain on ``n`` connections to ``target``'s schema; checks the writes after."""
    options = f"-c search_path={target.schema} -c enable_seqscan=off"
    async with AsyncExitStack() as stack:
        conns = [
            await stack.enter_async_context(
                await psycopg.AsyncConnection.connect(
                    conninfo(target.url), options=options, autocommit=True
                )
            )
            for _ in range(n)
        ]
        backends = []
        for c in conns:
            row = await (await c.execute("SELECT pg_backend_pid()")).fetchone()
            assert row is not None
            if Path(f"/proc/{row[0]}/stat").exists():
                backends.append(row[0])

        def server() -> float:
            return sum(process_tree_cpu_seconds(pid) for pid in backends)

        cpu0, server0, started = _client_cpu(), server(), time.perf_counter()
        await (io_jobs if mode == "io" else sync_jobs)(
            [postgresql_turn(c, writes) for c in conns], jobs, most
        )
        measured = Measured(
            time.perf_counter() - started,
            _client_cpu() - cpu0,
            server() - server0 if backends else None,
        )
        row = await (await conns[0].execute(writes.check)).fetchone()
    _check(row, writes.left(jobs))
    return measured


async def drain_sqlite(target: Target, mode: str, jobs: int, most: int) -> Measured:
    """Drain ``target``'s file (WAL, synchronous NORMAL); checks the writes after."""
    conn = sqlite3.connect(
        target.url.removeprefix("sqlite:///"), isolation_level=None, check_same_thread=False
    )
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        with ThreadPoolExecutor(1, thread_name_prefix="floor-sqlite") as thread:
            cpu0, started = _client_cpu(), time.perf_counter()
            run = io_jobs if mode == "io" else sync_jobs
            await run([sqlite_turn(conn, thread)], jobs, most)
            measured = Measured(time.perf_counter() - started, _client_cpu() - cpu0, None)
        kickside = WRITES["kickside"]
        _check(conn.execute(kickside.check).fetchone(), kickside.left(jobs))
    finally:
        conn.close()
    return measured


def _client_cpu() -> float:
    return process_tree_cpu_seconds(os.getpid())


def _check(row: Any, expected: tuple[int, int, int]) -> None:
    """The drain made the writes it claims: with Kickside's, every job completed with one run
    row, finished; with the minimal ones, every row deleted."""
    if tuple(row or ()) != expected:
        raise RuntimeError(f"expected {expected} after the drain, found {row}")


@contextmanager
def _target(backend: str, url: str) -> Iterator[Target]:
    if backend == "postgresql":
        with postgresql_target(url, f"bench_drain_floor_{os.getpid()}") as target:
            yield target
    else:
        with sqlite_target() as target:
            yield target


def _execute(target: Target, statements: tuple[str, ...], jobs: int) -> None:
    """Run ``statements`` (which may bind ``%(jobs)s``) in ``target``'s PostgreSQL schema."""
    if not statements:
        return
    options = f"-c search_path={target.schema}"
    with psycopg.connect(conninfo(target.url), options=options, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement, {"jobs": jobs})


def round_(
    backend: str,
    url: str,
    mode: str,
    jobs: int,
    turns_in_flight: int,
    most: int,
    writes: str = "kickside",
) -> dict[str, float]:
    """One round on a fresh schema or file: jobs/s and CPU µs per job."""
    with _target(backend, url) as target:
        if writes == "minimal":
            _execute(target, MINIMAL_SETUP, jobs)
        else:
            db = target.open()
            try:
                enqueue_fanout(db, JobBuilder("noop"), [{"i": i} for i in range(jobs)])
            finally:
                db.dispose()
        _execute(target, WRITES[writes].changes, jobs)
        if backend == "postgresql":
            m = asyncio.run(
                drain_postgresql(target, mode, jobs, turns_in_flight, most, WRITES[writes])
            )
        else:
            m = asyncio.run(drain_sqlite(target, mode, jobs, most))
    figures = {"jobs_per_s": jobs / m.seconds, "client_cpu_us": m.client / jobs * 1e6}
    if m.server is not None:
        figures["server_cpu_us"] = m.server / jobs * 1e6
    return figures


def main(argv: list[str] | None = None) -> int:
    """Drain ``--rounds`` times; print each round and the medians."""
    parser = argparse.ArgumentParser(prog="python -m bench.drain_floor")
    parser.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    parser.add_argument("--mode", choices=("io", "sync"), default="io")
    parser.add_argument("--database-url", default=DEFAULT_POSTGRES_URL)
    parser.add_argument("--jobs", type=int, default=None, help="default: 40,000 (io), 20,000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--turns", type=int, choices=(1, 2, 3, 4), default=1, help="in flight (PostgreSQL)"
    )
    parser.add_argument(
        "--most-per-turn", type=int, default=1_000_000, help="claim at most this many a turn"
    )
    parser.add_argument(
        "--writes",
        choices=tuple(WRITES),
        default="kickside",
        help="Kickside's writes; the least Kickside could write keeping its promises (lean); "
        "its job row and lease without run history (lease_only); the least a durable queue "
        "writes (minimal); PostgreSQL for all but the first",
    )
    args = parser.parse_args(argv)
    if args.backend == "sqlite" and args.turns != 1:
        parser.error("SQLite has one writer: --turns 1 only")
    if args.backend == "sqlite" and args.writes != "kickside":
        parser.error(f"--writes {args.writes} is for PostgreSQL")
    jobs = args.jobs or (40_000 if args.mode == "io" else 20_000)
    rounds = [
        round_(
            args.backend,
            args.database_url,
            args.mode,
            jobs,
            args.turns,
            args.most_per_turn,
            args.writes,
        )
        for _ in range(args.rounds)
    ]
    what = (
        f"{IO_SLOTS} tasks of a {IO_SLEEP_S * 1000:.0f} ms sleep"
        if args.mode == "io"
        else f"{SYNC_WORKERS} worker processes, batches of {SYNC_BATCH}"
    )
    most = "" if args.most_per_turn >= jobs else f", at most {args.most_per_turn} claimed a turn"
    print(
        f"drain floor, {args.backend}, {args.mode}, {args.writes} writes: {jobs} jobs, {what}, "
        f"{args.turns} turn(s) in flight{most}"
    )
    for name in rounds[0]:
        each = ", ".join(f"{r[name]:,.1f}" for r in rounds)
        print(f"  {name}: {statistics.median(r[name] for r in rounds):,.1f} ({each})")
    if args.mode == "io":
        share = statistics.median(r["jobs_per_s"] for r in rounds) / (IO_SLOTS / IO_SLEEP_S)
        print(f"  share of the Little's-law limit: {share:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
