"""`kickside capacity`: capacity groups (limits, usage, waiting jobs) and setting their limits."""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine.capacity import capacity_groups, set_capacity
from kickside_tui.cli import output
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.options import JsonOption

app = typer.Typer(help="Show capacity groups, or set a group's limits.")


def _limit(value: int | None) -> str:
    return "invalid" if value is None else str(value)


@app.callback(invoke_without_command=True)
@handles_errors
def capacity(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List capacity groups: limits, jobs executing (per key), and due jobs waiting, and why."""
    if ctx.invoked_subcommand is not None:
        return
    groups = capacity_groups(open_database(ctx), now())
    if as_json:
        output.emit_json({"groups": [
            {**output.to_jsonable(g), "near_limit": g.near_limit} for g in groups
        ]})
        return
    output.table(
        None,
        ("group", "settings", "global limit", "per-key limit", "executing", "busiest keys",
         "waiting", "problem"),
        [
            [
                g.group, g.settings_namespace, _limit(g.global_limit), _limit(g.per_key_limit),
                g.executing,
                ", ".join(f"{k or '(none)'}:{n}" for k, n in
                          sorted(g.per_key.items(), key=lambda kv: -kv[1])[:5]),
                g.waiting, g.problem,
            ]
            for g in groups
        ],
    )
    for g in groups:
        if g.waiting_jobs:
            output.table(
                f"{g.group}: due jobs not admitted now",
                ("job id", "concurrency key", "reason"),
                [[w.job_id, w.concurrency_key, w.reason] for w in g.waiting_jobs],
            )
    if not groups:
        output.note("no capacity group has unfinished jobs")


@app.command("set")
@handles_errors
@writes
def set_limits(
    ctx: typer.Context,
    namespace: Annotated[str, typer.Argument(metavar="NAMESPACE",
                                             help="The group's settings namespace.")],
    global_limit: Annotated[int, typer.Option("--global-limit",
                                              help="Jobs of the group running at once.")],
    per_key_limit: Annotated[int, typer.Option("--per-key-limit",
                                               help="Jobs per concurrency key at once.")],
    global_key: Annotated[str, typer.Option("--global-key", help="Setting key of the global "
                                            "limit.")] = "global_limit",
    per_key_key: Annotated[str, typer.Option("--per-key-key", help="Setting key of the "
                                             "per-key limit.")] = "concurrency_key_limit",
    as_json: JsonOption = False,
) -> None:
    """Set a capacity group's two limits (read by every claim from then on); audited."""
    written = set_capacity(
        open_database(ctx), namespace, global_limit=global_limit, per_key_limit=per_key_limit,
        actor=actor(), now=now(), global_limit_key=global_key,
        concurrency_key_limit_key=per_key_key,
    )
    if as_json:
        output.emit_json({"namespace": namespace, "settings": written})
        return
    output.plain(
        f"capacity {namespace}: "
        + ", ".join(f"{key}={value}" for key, value in written.items())
    )
