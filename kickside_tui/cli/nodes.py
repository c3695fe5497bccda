"""`kickside nodes`: the registered worker pools, their heartbeats and executors."""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine.control import list_nodes
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, now, open_database
from kickside_tui.cli.documents import seconds, short_time
from kickside_tui.cli.options import JsonOption
from kickside_tui.cli.output import Column


@handles_errors
def nodes(
    ctx: typer.Context,
    host: Annotated[
        str | None, typer.Option("--host", help="Only the nodes running on this host.")
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Exit 1 unless a listed node has a fresh heartbeat (a readiness probe: "
            'kickside nodes --host "$(hostname)" --check).',
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List worker pools: host, PID, queues, code version, executors, heartbeat age.

    Executors show by kind with busy/total slots (``process 3/8, async 120/200``).
    """
    infos = list_nodes(open_database(ctx), now())
    if host is not None:
        infos = [n for n in infos if n.host == host]
    if check and not any(not n.stale for n in infos):
        where = f" on host {host!r}" if host is not None else ""
        output.error(f"no node{where} has a fresh heartbeat")
        raise typer.Exit(1)
    if as_json:
        output.emit_json({"nodes": infos})
        return
    output.table(
        None,
        (
            "node",
            Column("host", priority=3),
            Column("pid", priority=5, justify="right"),
            Column("queues", flex=True),
            Column("code version", priority=4),
            Column("executors", priority=2),
            Column("started (UTC)", priority=6),
            Column("heartbeat age", justify="right"),
            "stale",
        ),
        [
            [
                n.name,
                n.host,
                n.pid,
                ", ".join(f"{q}:{c}" for q, c in sorted(n.queues.items())),
                n.code_version,
                ", ".join(str(k) for k in n.executors) or "-",
                short_time(n.started_at),
                seconds(n.heartbeat_age),
                n.stale,
            ]
            for n in infos
        ],
    )
    if not infos:
        output.note("no nodes have registered: start one with `kickside worker`")
