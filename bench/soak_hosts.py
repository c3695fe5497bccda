"""The soak's other processes: ``python -m bench.soak_hosts pool|dashboard --database-url URL``.

``pool`` runs a :class:`WorkerPool` (process mode, app ``bench.workloads.app``) whose Pruner
keeps ``--retention-seconds`` of finished jobs; ``dashboard`` runs the real Textual dashboard
headless, moving to the next view every ``--cycle-seconds`` so every view's refresh queries run.
Each prints ``ready``, runs until its standard input closes or it gets SIGTERM, then prints one
JSON line: the pool's outcome counts, or the dashboard's loads and failed refreshes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
from datetime import timedelta
from typing import Any

from bench.workloads.poolhost import APP, cpu_seconds, wait_ready
from kickside_engine import Database
from kickside_engine.runtime import PoolConfig, WorkerPool

VIEW_KEYS = "1234567"


def _stop_event() -> threading.Event:
    """Set when standard input closes or SIGTERM arrives."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def watch_stdin() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=watch_stdin, name="soak-stdin", daemon=True).start()
    return stop


def run_pool(db: Database, args: argparse.Namespace) -> dict[str, Any]:
    """Run one pool until told to stop; its outcome counts and CPU seconds."""
    config = PoolConfig(
        queues={"default": args.concurrency},
        app=APP,
        prune_after=timedelta(seconds=args.retention_seconds),
    )
    pool = WorkerPool(db, config)
    thread = threading.Thread(target=pool.run, name="soak-pool", daemon=True)
    thread.start()
    try:
        wait_ready(pool, alive=thread.is_alive)
        print("ready", flush=True)
        _stop_event().wait()
    finally:
        pool.request_stop()
        thread.join(60)
    return {"stats": dict(pool.stats), "cpu_s": round(cpu_seconds(), 2)}


def run_dashboard(db: Database, args: argparse.Namespace) -> dict[str, Any]:
    """Run the dashboard headless until told to stop; how many loads and failures it saw."""
    from kickside_tui.adapter import Adapter
    from kickside_tui.app import KicksideApp
    from kickside_tui.screens.base import ViewScreen
    from kickside_tui.widgets.chrome import Banner

    app = KicksideApp(Adapter(db), refresh_seconds=args.refresh_seconds)
    stop = _stop_event()
    views: dict[int, ViewScreen] = {}
    report: dict[str, Any] = {"failed_samples": 0, "cycles": 0}

    async def drive() -> None:
        async with app.run_test(size=(160, 50)) as pilot:
            print("ready", flush=True)
            while not stop.is_set():
                await pilot.press(VIEW_KEYS[report["cycles"] % len(VIEW_KEYS)])
                report["cycles"] += 1
                await asyncio.sleep(args.cycle_seconds)
                screen = app.screen
                if isinstance(screen, ViewScreen):
                    views[id(screen)] = screen
                    if screen.query_one(Banner).shown:
                        report["failed_samples"] += 1

    asyncio.run(drive())
    report["loads"] = sum(v.loaded for v in views.values())
    return report


def main(argv: list[str] | None = None) -> int:
    """Run one soak process; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.soak_hosts")
    parser.add_argument("role", choices=["pool", "dashboard"])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--schema", default=None)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--retention-seconds", type=float, default=60.0)
    parser.add_argument("--refresh-seconds", type=float, default=1.0)
    parser.add_argument("--cycle-seconds", type=float, default=3.0)
    args = parser.parse_args(argv)
    db = Database.from_url(args.database_url, schema=args.schema)
    try:
        summary = run_pool(db, args) if args.role == "pool" else run_dashboard(db, args)
    finally:
        db.dispose()
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
