"""Run the workloads against one peer (inside ``bench/.peers-venv``); prints one JSON document.

``python -m bench.peers.driver --system NAME --conninfo DSN --schema S --workdir DIR
--count WORKLOAD=N ...``: the runner passes the counts, so both sides use the same ones.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from bench.peers import multinode, protocol

SYSTEMS = {
    "procrastinate": "bench.peers.procrastinate_peer",
    "pgqueuer": "bench.peers.pgqueuer_peer",
    "chancy": "bench.peers.chancy_peer",
    "awa": "bench.peers.awa_peer",
    "oban": "bench.peers.oban_peer",
}


def main(argv: list[str] | None = None) -> int:
    """Run the requested workloads against one peer and print their results as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.driver")
    parser.add_argument("--system", choices=sorted(SYSTEMS), required=True)
    parser.add_argument("--conninfo", required=True)
    parser.add_argument("--schema", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--count", action="append", default=[], metavar="WORKLOAD=N")
    parser.add_argument(
        "--history",
        default="10000,1000000",
        metavar="SMALL,LARGE",
        help="history_scale's two history sizes",
    )
    parser.add_argument("--pool-counts", default="1,2,4", metavar="N,N,...")
    args = parser.parse_args(argv)
    small, large = (int(x) for x in args.history.split(","))
    pool_counts = tuple(int(x) for x in args.pool_counts.split(","))
    counts = {k: int(v) for k, _, v in (c.partition("=") for c in args.count)}

    module: Any = importlib.import_module(SYSTEMS[args.system])
    peer = module.open_peer(args.conninfo, args.schema)
    worker_args = ["--conninfo", args.conninfo, "--schema", args.schema]
    log = args.workdir / f"peer-{args.system}.log"
    results: list[dict[str, Any]] = []
    runners = {
        "bulk_enqueue": lambda n: protocol.bulk_enqueue(peer, n),
        "single_enqueue": lambda n: protocol.single_enqueue(peer, n),
        "drain": lambda n: protocol.drain(
            peer, protocol.WorkerProcess(peer.module, worker_args, log), n
        ),
        "latency": lambda n: protocol.latency(
            peer,
            protocol.WorkerProcess(peer.module, worker_args, log),
            n,
            args.workdir / f"latency-{args.system}.stamps",
        ),
        "history_scale": lambda n: protocol.history_scale(
            peer, n, {"small": small, "large": large}, args.conninfo
        ),
        "async_drain": lambda n: protocol.async_drain(
            peer,
            protocol.WorkerProcess(peer.module, [*worker_args, "--concurrency", "10"], log),
            n,
            workload="async_drain",
            task="noop",
            args=None,
            concurrency=protocol.CONCURRENCY,
            backend_pid=peer.backend_pid(),
        ),
        "io_drain": lambda n: protocol.async_drain(
            peer,
            protocol.WorkerProcess(
                peer.module, [*worker_args, "--concurrency", str(protocol.IO_SLOTS)], log
            ),
            n,
            workload="io_drain",
            task="io",
            args={"seconds": protocol.IO_SECONDS},
            concurrency=protocol.IO_SLOTS,
            backend_pid=peer.backend_pid(),
        ),
        "async_latency": lambda n: protocol.latency(
            peer,
            protocol.WorkerProcess(peer.module, [*worker_args, "--concurrency", "10"], log),
            n,
            args.workdir / f"async-latency-{args.system}.stamps",
            workload="async_latency",
        ),
        "multi_node": lambda n: multinode.multi_node(
            peer, worker_args, args.workdir, n, peer.backend_pid(), pool_counts
        ),
    }
    try:
        for workload, n in counts.items():
            print(f"[{args.system}] {workload}: {n} jobs", file=sys.stderr, flush=True)
            protocol.checkpoint(args.conninfo)
            try:
                results.append(runners[workload](n))
            except Exception as exc:
                traceback.print_exc()
                entry = protocol.result(peer, workload, params={"jobs": n}, metrics={})
                entry["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
                results.append(entry)
    finally:
        peer.close()
    print(json.dumps({"system": peer.name, "version": peer.version, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
