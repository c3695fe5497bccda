"""`kickside capacity`: capacity groups (limits, usage, waiting jobs) and setting their limits."""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine import NotFoundError
from kickside_engine.control import capacity_groups, set_capacity, stops_work
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.options import JsonOption, YesOption
from kickside_tui.cli.output import Column

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
        output.emit_json(
            {"groups": [{**output.to_jsonable(g), "near_limit": g.near_limit} for g in groups]}
        )
        return
    output.table(
        None,
        (
            "group",
            Column("settings", priority=3),
            Column("global limit", justify="right"),
            Column("per-key limit", justify="right"),
            Column("executing", justify="right"),
            Column("busiest keys", priority=4, flex=True),
            Column("waiting", justify="right"),
            Column("problem", priority=2, flex=True),
        ),
        [
            [
                g.group,
                g.settings_namespace,
                _limit(g.global_limit),
                _limit(g.per_key_limit),
                g.executing,
                ", ".join(
                    f"{k or '(none)'}:{n}"
                    for k, n in sorted(g.per_key.items(), key=lambda kv: -kv[1])[:5]
                ),
                g.waiting,
                g.problem,
            ]
            for g in groups
        ],
    )
    for g in groups:
        if g.waiting_jobs:
            output.table(
                f"{g.group}: due jobs not admitted now",
                ("job id", "concurrency key", Column("reason", flex=True)),
                [[w.job_id, w.concurrency_key, w.reason] for w in g.waiting_jobs],
            )
    if not groups:
        output.note("no capacity group has unfinished jobs")


@app.command("set")
@handles_errors
@writes
def set_limits(
    ctx: typer.Context,
    namespace: Annotated[
        str, typer.Argument(metavar="NAMESPACE", help="The group's settings namespace.")
    ],
    global_limit: Annotated[
        int, typer.Option("--global-limit", metavar="N", help="Jobs of the group running at once.")
    ],
    per_key_limit: Annotated[
        int, typer.Option("--per-key-limit", metavar="N", help="Jobs per concurrency key at once.")
    ],
    global_key: Annotated[
        str, typer.Option("--global-key", metavar="KEY", help="Setting key of the global limit.")
    ] = "global_limit",
    per_key_key: Annotated[
        str, typer.Option("--per-key-key", metavar="KEY", help="Setting key of the per-key limit.")
    ] = "concurrency_key_limit",
    create: Annotated[
        bool,
        typer.Option(
            "--create",
            help="Set limits under a namespace no job declares and no setting uses "
            "yet (before the workers that declare it are deployed).",
        ),
    ] = False,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Set a capacity group's two limits (read by every claim from then on); audited.

    An unknown namespace is refused, listing the known ones, unless --create. A limit of 0
    stops the group (no job of it is admitted): that asks first (--yes for scripts).
    """
    db = open_database(ctx)
    if stops_work(global_limit, per_key_limit):
        zero = "--global-limit" if global_limit == 0 else "--per-key-limit"
        unless_yes(
            yes,
            f"Stop capacity group {namespace}? With {zero} 0 no job of the group "
            "is admitted (running ones finish) until the limit is raised.",
        )
    try:
        written = set_capacity(
            db,
            namespace,
            global_limit=global_limit,
            per_key_limit=per_key_limit,
            actor=actor(),
            now=now(),
            global_limit_key=global_key,
            concurrency_key_limit_key=per_key_key,
            create=create,
        )
    except NotFoundError as exc:
        raise NotFoundError(f"{exc}; --create sets it anyway", exc.details) from None
    if as_json:
        output.emit_json({"namespace": namespace, "settings": written})
        return
    output.plain(
        f"capacity {namespace}: " + ", ".join(f"{key}={value}" for key, value in written.items())
    )
