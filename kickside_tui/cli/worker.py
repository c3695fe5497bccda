"""`kickside worker` (the supervised pool) and `kickside reload` (upgrade pools in place)."""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Annotated

import typer

from kickside_engine.runtime import PoolConfig, WorkerPool, parse_queues, signal_reload
from kickside_tui.cli import output
from kickside_tui.cli.context import (
    app_spec,
    handles_errors,
    now,
    record_action,
    state,
    writes,
)


def worker(
    ctx: typer.Context,
    app: Annotated[str, typer.Option("--app", help="Module with a WorkerRegistry "
                                     "(module or module:attribute).")],
    queues: Annotated[str, typer.Option("--queues", envvar="KICKSIDE_QUEUES",
                                        help="Queues and per-node concurrency.")]
    = "default:10,mailers:5",
    in_process: Annotated[bool, typer.Option("--in-process", help="Run jobs on threads of "
                                             "this process (no kill on timeout).")] = False,
    shutdown_grace: Annotated[float, typer.Option("--shutdown-grace", min=0,
                                                  help="Seconds to wait for running jobs.")]
    = 25.0,
    lease_seconds: Annotated[float, typer.Option("--lease-seconds", min=3)] = 30.0,
    node: Annotated[str | None, typer.Option("--node", help="Node name (default host:pid).")]
    = None,
    log_level: Annotated[str, typer.Option("--log-level")] = "INFO",
    prefetch: Annotated[int | None, typer.Option(
        "--prefetch", min=0, help="Jobs claimed ahead of free executors while jobs are fast "
        "(default: what the executors get through in one database turn, 2-12 per executor; "
        "0: off).")] = None,
) -> None:
    """Run a supervised worker pool until SIGTERM/SIGINT; SIGHUP upgrades it in place."""
    from datetime import timedelta

    run_worker(ctx, app, queues, in_process, timedelta(seconds=shutdown_grace),
               timedelta(seconds=lease_seconds), node, log_level, prefetch)


@handles_errors
@writes
def run_worker(ctx: typer.Context, app: str, queues: str, in_process: bool,
               grace: object, lease: object, node: str | None, log_level: str,
               prefetch: int | None = None) -> None:
    from kickside_engine import migrate
    from kickside_engine.logs import configure_logging

    configure_logging(log_level)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the app module is found from here
    db = state(ctx).database()
    migrate.ensure_current(db)
    config = PoolConfig(
        queues=parse_queues(queues), app=app_spec(app), mode="thread" if in_process else "process",
        shutdown_grace=grace, lease=lease, node=node,  # type: ignore[arg-type]
        prefetch=prefetch,
    )
    pool = WorkerPool(db, config)
    output.note(f"kickside worker {pool.node} on {db.display_url()} queues={queues}")
    pool.run()


def reload(ctx: typer.Context) -> None:
    """Ask every pool to load new worker code in place (SIGHUP here, NOTIFY on PostgreSQL)."""
    _reload(ctx)


@handles_errors
@writes
def _reload(ctx: typer.Context) -> None:
    db = state(ctx).database()
    # Audited first: a role that may not write gets no further than the audit row.
    record_action(db, "reload", "pools", "all", {"host": socket.gethostname()}, now())
    signalled = signal_reload(db)
    output.info(f"asked {signalled} pool(s) to reload")


logging.getLogger("kickside").addHandler(logging.NullHandler())
