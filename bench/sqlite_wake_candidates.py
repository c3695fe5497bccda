"""Measure the candidate cross-process wake-ups on one SQLite file (issue 26), on this machine.

``python -m bench.sqlite_wake_candidates [--commits N]`` runs a writer process that commits a
row every 20 ms and a waiter process that learns of each commit by one of the candidates:

- ``data_version_5ms`` / ``data_version_1ms``: a dedicated connection reads
  ``PRAGMA data_version`` at that interval (it changes when another connection commits);
- ``inotify_wal``: inotify ``IN_MODIFY`` on the ``-wal`` file (Linux only, through ctypes);
- ``datagram``: the writer sends a Unix datagram after its commit to a socket the waiter bound
  beside the database file (what Kickside ships: :mod:`kickside_engine.store.wake_sockets`).

For each: commit-to-notice p50/p99 (ms), the waiter's CPU per second while it waits (ms/s) and
the writer's extra cost per commit (µs). Stamps are ``CLOCK_MONOTONIC``, comparable across
processes on Linux. The figures and the choice are in docs/operating/sqlite.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import multiprocessing as mp
import os
import select
import socket
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

INTERVAL_S = 0.020


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _waiter(candidate: str, path: Path, n: int, ready: Any, out: Any) -> None:
    seen: list[int] = []
    until = time.monotonic() + n * INTERVAL_S + 3.0
    cpu0 = time.process_time()
    wall0 = time.monotonic()
    if candidate.startswith("data_version"):
        interval = 0.005 if candidate.endswith("5ms") else 0.001
        conn = _connect(path)
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        ready.set()
        while time.monotonic() < until:
            time.sleep(interval)
            now = conn.execute("PRAGMA data_version").fetchone()[0]
            if now != version:
                version = now
                seen.append(time.monotonic_ns())
    elif candidate == "inotify_wal":
        keep = _connect(path)  # the -wal file exists while a connection is open
        keep.execute("SELECT count(*) FROM t").fetchone()
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fd = libc.inotify_init1(os.O_NONBLOCK)
        if libc.inotify_add_watch(fd, str(path).encode() + b"-wal", 0x2) < 0:  # IN_MODIFY
            raise OSError(ctypes.get_errno(), "inotify_add_watch")
        ready.set()
        while time.monotonic() < until:
            select.select([fd], [], [], 1.0)
            stamp = time.monotonic_ns()
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                continue
            if data:
                seen.append(stamp)
                time.sleep(0.002)  # one commit writes the WAL more than once: coalesce
                with contextlib.suppress(BlockingIOError):
                    os.read(fd, 65536)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(path) + ".sock")
        ready.set()
        while time.monotonic() < until:
            if select.select([sock], [], [], 0.5)[0]:
                seen.append(time.monotonic_ns())
                sock.recv(512)
        sock.close()
    cpu = time.process_time() - cpu0
    out.put((seen, cpu / (time.monotonic() - wall0)))


def _writer(candidate: str, path: Path, n: int, out: Any) -> None:
    conn = _connect(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.setblocking(False)
    target = str(path) + ".sock"
    begins, commits, costs = [], [], []
    origin = time.monotonic()
    for i in range(n):
        begins.append(time.monotonic_ns())
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (v) VALUES (?)", (i,))
        conn.execute("COMMIT")
        commits.append(time.monotonic_ns())
        if candidate == "datagram":
            t0 = time.perf_counter_ns()
            sock.sendto(b"default", target)
            costs.append(time.perf_counter_ns() - t0)
        pause = origin + (i + 1) * INTERVAL_S - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    out.put((begins, commits, costs))


def measure(candidate: str, n: int) -> dict[str, float]:
    """Commit-to-notice p50/p99 (ms), waiter CPU (ms per s) and sender cost (µs per commit)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "w.db"
        _connect(path).execute("CREATE TABLE t (v INTEGER)")
        ctx = mp.get_context("spawn")
        ready, waiter_out, writer_out = ctx.Event(), ctx.Queue(), ctx.Queue()
        waiter = ctx.Process(target=_waiter, args=(candidate, path, n, ready, waiter_out))
        waiter.start()
        ready.wait(30)
        time.sleep(0.2)
        writer = ctx.Process(target=_writer, args=(candidate, path, n, writer_out))
        writer.start()
        begins, commits, costs = writer_out.get(timeout=120)
        seen, cpu_share = waiter_out.get(timeout=120)
        writer.join()
        waiter.join()
    # A commit is noticed by the first notice after its BEGIN (inotify sees the WAL written
    # before COMMIT returns: that counts as 0).
    lags = []
    for begin, commit in zip(begins, commits, strict=True):
        notice = next((s for s in seen if s >= begin), None)
        if notice is not None:
            lags.append(max(0, notice - commit) / 1e6)
    lags.sort()
    if not lags:
        raise RuntimeError(f"{candidate}: no commit noticed ({len(seen)} notices)")
    return {
        "p50_ms": lags[len(lags) // 2],
        "p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))],
        "waiter_cpu_ms_per_s": cpu_share * 1000,
        "sender_us_per_commit": (sorted(costs)[len(costs) // 2] / 1000) if costs else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args()
    print("| candidate | p50 ms | p99 ms | waiter CPU ms/s | sender µs/commit |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for candidate in ("data_version_5ms", "data_version_1ms", "inotify_wal", "datagram"):
        m = measure(candidate, args.commits)
        print(
            f"| {candidate} | {m['p50_ms']:.2f} | {m['p99_ms']:.2f} | "
            f"{m['waiter_cpu_ms_per_s']:.1f} | {m['sender_us_per_commit']:.1f} |"
        )


if __name__ == "__main__":
    main()
