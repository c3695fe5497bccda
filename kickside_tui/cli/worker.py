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
from kickside_engine.runtime import PoolConfig, WorkerPool, signal_reload
from kickside_tui.cli import config, output
from kickside_tui.cli.context import (
    handles_errors,
    now,
    record_action,
    state,
    writes,
)
from kickside_tui.cli.options import JsonOption
from kickside_tui.extras import require


@config.with_options(config.WORKER)
def worker(
    ctx: typer.Context,
    lease_seconds: Annotated[
        float | None,
        typer.Option(
            "--lease-seconds", min=3, hidden=True, help="The lease in seconds (use --lease)."
        ),
    ] = None,
    **given: Any,
) -> None:
    """Run a supervised worker pool until SIGTERM/SIGINT; SIGHUP upgrades it in place.

    Each option comes from its flag, else its KICKSIDE_* variable, else the configuration
    file (kickside.toml, or the tool.kickside table of pyproject.toml), else its default:
    `kickside config` shows which. The pool runs the app module's cron ``SCHEDULE`` (or
    ``--schedule``), loaded once at start. Exits 0 after a requested stop; 2 when the app
    cannot be loaded or an option or the configuration file is invalid; 1 when the pool stops
    on any other error; 5 when the database cannot be reached.
    """
    run_worker(ctx, config.given_flags(ctx, given), lease_seconds)


@handles_errors
@writes
def run_worker(ctx: typer.Context, flags: dict[str, Any], lease_seconds: float | None) -> None:
    from kickside_engine import migrate
    from kickside_engine.control import app_schedule, load_schedule
    from kickside_engine.runtime import configure_logging

    # Bad options (and a bad file) are refused before the database is opened.
    settings = state(ctx).settings(flags, names=config.WORKER)
    kwargs = settings.pool_kwargs()
    if kwargs["app"] is None:
        raise InvalidArgumentError(
            "no app: give --app MODULE (or KICKSIDE_APP, or app in the [worker] table of "
            "kickside.toml or [tool.kickside.worker] in pyproject.toml)"
        )
    if lease_seconds is not None:
        if settings.options["lease"].source == "flag":
            raise InvalidArgumentError("give --lease or --lease-seconds, not both")
        kwargs["lease"] = timedelta(seconds=lease_seconds)
    configure_logging(settings.value("log_level"), settings.value("log_format"))
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the app module is found from here
    # The supervisor imports the schedule's module (cron builds jobs here, not in executors).
    schedule = settings.value("schedule")
    entries = load_schedule(schedule) if schedule else app_schedule(kwargs["app"])
    db = state(ctx).database()
    migrate.ensure_current(db)
    pool_config = PoolConfig(**kwargs, schedule=entries)
    pool = WorkerPool(db, pool_config)
    pool.prepare()  # a role that may not write is one line, before the pool says it started
    metrics_port = settings.value("metrics_port")
    metrics = _serve_metrics(db, pool, metrics_port) if metrics_port else None
    queues = ",".join(f"{q}:{n}" for q, n in pool_config.queues.items())
    output.note(
        f"kickside worker {pool.node} on {db.display_url()} queues={queues} "
        f"lease={_leases_text(pool_config)}"
        + (f" cron entries={len(entries)}" if entries else "")
        + (f" metrics=:{metrics_port}/metrics" if metrics else "")
    )
    try:
        pool.run()
    finally:
        if metrics is not None:
            metrics.close()


def _serve_metrics(db: Any, pool: WorkerPool, port: int) -> Any:
    """Attach Prometheus metrics to ``pool`` and serve them on ``port`` (exit 2 without the
    metrics extra, or with the port in use)."""
    require(("prometheus_client",), extra="metrics", command="kickside worker --metrics-port")
    from kickside_engine.runtime import PoolMetrics

    metrics = PoolMetrics(db)
    metrics.attach(pool)
    metrics.serve(port)
    return metrics


def _leases_text(config: PoolConfig) -> str:
    """``30s`` or ``30s,reports=300s``: the leases the pool takes, for its first line."""
    own = [f"{q}={lease.total_seconds():g}s" for q, lease in config.queue_leases.items()]
    return ",".join([f"{config.lease.total_seconds():g}s", *own])


def reload(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Ask every pool to load new worker code in place (NOTIFY on PostgreSQL; on SQLite a
    datagram, and SIGHUP to this host's pools that no datagram reached)."""
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
