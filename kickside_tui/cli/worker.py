"""`kickside worker` (the supervised pool) and `kickside reload` (upgrade pools in place)."""

from __future__ import annotations

import logging
import os
import socket
import sys
from datetime import timedelta
from typing import Annotated, Any

import typer

from kickside_engine import InvalidArgumentError
from kickside_engine.runtime import (
    LOG_LEVELS,
    PoolConfig,
    WorkerPool,
    parse_duration,
    parse_queue_leases,
    parse_queues,
    signal_reload,
)
from kickside_tui.cli import output
from kickside_tui.cli.context import (
    app_spec,
    handles_errors,
    now,
    record_action,
    state,
    writes,
)
from kickside_tui.cli.options import JsonOption

#: Environment variable for ``--prune-after``.
PRUNE_AFTER_ENV = "KICKSIDE_PRUNE_AFTER"


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
    lease: Annotated[str | None, typer.Option(
        "--lease", envvar="KICKSIDE_LEASE", help="How long a claim holds a job unrenewed "
        "(30s, 2m, ...; default 30s), renewed every third of it. A job whose lease cannot be "
        "renewed in time (database away) is stopped: use at least twice your database's "
        "failover time (docs: Deploying, the lease and database failovers).")] = None,
    queue_leases: Annotated[str | None, typer.Option(
        "--queue-leases", envvar="KICKSIDE_QUEUE_LEASES", help="Queues with a lease of their "
        "own: queue=duration,... (e.g. reports=5m).")] = None,
    lease_seconds: Annotated[float | None, typer.Option(
        "--lease-seconds", min=3, hidden=True, help="The lease in seconds (use --lease).")]
    = None,
    node: Annotated[str | None, typer.Option("--node", help="Node name (default host:pid).")]
    = None,
    log_level: Annotated[str, typer.Option(
        "--log-level", metavar="LEVEL",
        help=f"Log records from this level on, to stderr: {', '.join(LOG_LEVELS)}.")]
    = "INFO",
    prefetch: Annotated[int | None, typer.Option(
        "--prefetch", min=0, help="Jobs claimed ahead of free executors while jobs are fast "
        "(default: what the executors get through in one database turn, 2-12 per executor; "
        "0: off).")] = None,
    schedule: Annotated[str | None, typer.Option(
        "--schedule", metavar="MODULE[:ATTRIBUTE]", help="The cron schedule to run (default "
        "attribute SCHEDULE). Default: the --app module's SCHEDULE, if it defines one.")]
    = None,
    prune_after: Annotated[str, typer.Option(
        "--prune-after", envvar=PRUNE_AFTER_ENV, show_envvar=True,
        help="Delete completed, cancelled and discarded jobs this long after they finished: "
        "7d, 12h, 30m, 45s or seconds.")] = "7d",
) -> None:
    """Run a supervised worker pool until SIGTERM/SIGINT; SIGHUP upgrades it in place.

    The pool runs the app module's cron ``SCHEDULE`` (or ``--schedule``), loaded once at start.
    Exits 0 after a requested stop; 2 when the app cannot be loaded or an option is invalid;
    1 when the pool stops on any other error; 5 when the database cannot be reached.
    """
    run_worker(ctx, app, queues, in_process, timedelta(seconds=shutdown_grace),
               (lease, lease_seconds, queue_leases), node, log_level, prefetch, schedule,
               prune_after)


@handles_errors
@writes
def run_worker(ctx: typer.Context, app: str, queues: str, in_process: bool,
               grace: object, lease: tuple[str | None, float | None, str | None],
               node: str | None, log_level: str,
               prefetch: int | None = None, schedule: str | None = None,
               prune_after: str = "7d") -> None:
    from kickside_engine import migrate
    from kickside_engine.control import app_schedule, load_schedule
    from kickside_engine.runtime import configure_logging

    limits = parse_queues(queues)  # bad options are refused before the database is opened
    leases = _leases(*lease)
    retention = parse_duration(prune_after, f"--prune-after ({PRUNE_AFTER_ENV})")
    configure_logging(log_level)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the app module is found from here
    app = app_spec(app)
    # The supervisor imports the schedule's module (cron builds jobs here, not in executors).
    entries = (
        load_schedule(app_spec(schedule, "--schedule")) if schedule else app_schedule(app)
    )
    db = state(ctx).database()
    migrate.ensure_current(db)
    config = PoolConfig(
        queues=limits, app=app, mode="thread" if in_process else "process",
        shutdown_grace=grace, node=node,  # type: ignore[arg-type]
        prefetch=prefetch, schedule=entries, prune_after=retention, **leases,
    )
    pool = WorkerPool(db, config)
    pool.prepare()  # a role that may not write is one line, before the pool says it started
    output.note(f"kickside worker {pool.node} on {db.display_url()} queues={queues} "
                f"lease={_leases_text(config)}"
                + (f" cron entries={len(entries)}" if entries else ""))
    pool.run()


def _leases(
    lease: str | None, lease_seconds: float | None, queue_leases: str | None
) -> dict[str, Any]:
    """``PoolConfig``'s ``lease`` and ``queue_leases`` from the options, checked before the
    database is opened."""
    if lease is not None and lease_seconds is not None:
        raise InvalidArgumentError("give --lease or --lease-seconds, not both")
    if lease is not None:
        default = parse_duration(lease, "--lease")
    else:
        default = timedelta(seconds=30 if lease_seconds is None else lease_seconds)
    return {
        "lease": default,
        "queue_leases": parse_queue_leases(queue_leases) if queue_leases else {},
    }


def _leases_text(config: PoolConfig) -> str:
    """``30s`` or ``30s,reports=300s``: the leases the pool takes, for its first line."""
    own = [f"{q}={lease.total_seconds():g}s" for q, lease in config.queue_leases.items()]
    return ",".join([f"{config.lease.total_seconds():g}s", *own])


def reload(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Ask every pool to load new worker code in place (SIGHUP here, NOTIFY on PostgreSQL)."""
    _reload(ctx, as_json=as_json)


@handles_errors
@writes
def _reload(ctx: typer.Context, *, as_json: bool = False) -> None:
    db = state(ctx).database()
    # Audited first: a role that may not write gets no further than the audit row.
    record_action(db, "reload", "pools", "all", {"host": socket.gethostname()}, now())
    signalled = signal_reload(db)
    if as_json:
        output.emit_json({"signalled": signalled})
    else:
        output.info(f"asked {signalled} pool(s) to reload")


logging.getLogger("kickside").addHandler(logging.NullHandler())
