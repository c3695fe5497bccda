"""`kickside capacity`: capacity groups (limits, usage, waiting jobs) and setting their limits."""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine import InvalidArgumentError, NotFoundError
from kickside_engine.control import (
    NO_RATE,
    CapacityGroupInfo,
    capacity_groups,
    parse_rate,
    set_capacity,
    stops_work,
)
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.options import JsonOption, YesOption
from kickside_tui.cli.output import Column

app = typer.Typer(help="Show capacity groups, or set a group's limits.")


def _limit(value: int | None) -> str:
    return "invalid" if value is None else str(value)


def _rate(group: CapacityGroupInfo) -> str:
    """``7/600 per min``: the group's starts this window against its rate ("-": none)."""
    if group.rate_limit is None:
        return "-"
    limit, _, unit = group.rate_limit.partition("/")
    return f"{group.rate_used}/{limit} per {unit}"


def _key_rate(group: CapacityGroupInfo) -> str:
    """``60/min (busiest acct-1: 60)``: the per-key rate and the key nearest it."""
    if group.rate_limit_per_key is None:
        return "-"
    if not group.rate_used_per_key:
        return group.rate_limit_per_key
    key, used = max(group.rate_used_per_key.items(), key=lambda kv: (kv[1], kv[0]))
    return f"{group.rate_limit_per_key} (busiest {key}: {used})"


def _checked_rate(option: str, value: str | None) -> str | None:
    """``value`` if it is ``N/unit`` or ``none``, else a usage error naming ``option``."""
    if value is None or value.strip() == NO_RATE:
        return value
    try:
        parse_rate(value)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{option}: {exc}") from None
    return value


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
            Column("rate", justify="right"),
            Column("per-key rate", priority=3),
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
                _rate(g),
                _key_rate(g),
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
        int | None,
        typer.Option("--global-limit", metavar="N", help="Jobs of the group running at once."),
    ] = None,
    per_key_limit: Annotated[
        int | None,
        typer.Option("--per-key-limit", metavar="N", help="Jobs per concurrency key at once."),
    ] = None,
    rate_limit: Annotated[
        str | None,
        typer.Option(
            "--rate-limit",
            metavar="N/UNIT",
            help="Starts of the group per window: 600/min, 10/s, 3600/h; none removes it.",
        ),
    ] = None,
    rate_limit_per_key: Annotated[
        str | None,
        typer.Option(
            "--rate-limit-per-key",
            metavar="N/UNIT",
            help="Starts per concurrency key per window (60/min); none removes it.",
        ),
    ] = None,
    global_key: Annotated[
        str, typer.Option("--global-key", metavar="KEY", help="Setting key of the global limit.")
    ] = "global_limit",
    per_key_key: Annotated[
        str, typer.Option("--per-key-key", metavar="KEY", help="Setting key of the per-key limit.")
    ] = "concurrency_key_limit",
    rate_key: Annotated[
        str, typer.Option("--rate-key", metavar="KEY", help="Setting key of the rate limit.")
    ] = "rate_limit",
    per_key_rate_key: Annotated[
        str,
        typer.Option(
            "--per-key-rate-key", metavar="KEY", help="Setting key of the per-key rate limit."
        ),
    ] = "rate_limit_per_key",
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
    """Set a capacity group's limits (read by every claim from then on); audited.

    Give any of the concurrency limits and the rate limits (starts per window, fixed windows
    aligned to the clock: 600/min admits at most 600 starts in each calendar minute). An
    unknown namespace is refused, listing the known ones, unless --create. A limit or rate of 0
    stops the group (no job of it is admitted): that asks first (--yes for scripts).
    """
    rate_limit = _checked_rate("--rate-limit", rate_limit)
    rate_limit_per_key = _checked_rate("--rate-limit-per-key", rate_limit_per_key)
    if (global_limit, per_key_limit, rate_limit, rate_limit_per_key) == (None,) * 4:
        raise InvalidArgumentError(
            "give at least one of --global-limit, --per-key-limit, --rate-limit, "
            "--rate-limit-per-key"
        )
    db = open_database(ctx)
    if stops_work(global_limit, per_key_limit, rate_limit, rate_limit_per_key):
        zeros = {
            "--global-limit": global_limit == 0,
            "--per-key-limit": per_key_limit == 0,
            "--rate-limit": stops_work(None, None, rate_limit),
            "--rate-limit-per-key": stops_work(None, None, None, rate_limit_per_key),
        }
        zero = next(name for name, stops in zeros.items() if stops)
        unless_yes(
            yes,
            f"Stop capacity group {namespace}? With {zero} at 0 no job of the group "
            "is admitted (running ones finish) until the limit is raised.",
        )
    try:
        written = set_capacity(
            db,
            namespace,
            global_limit=global_limit,
            per_key_limit=per_key_limit,
            rate_limit=rate_limit,
            rate_limit_per_key=rate_limit_per_key,
            actor=actor(),
            now=now(),
            global_limit_key=global_key,
            concurrency_key_limit_key=per_key_key,
            rate_limit_key=rate_key,
            rate_limit_per_key_key=per_key_rate_key,
            create=create,
        )
    except NotFoundError as exc:
        raise NotFoundError(f"{exc}; --create sets it anyway", exc.details) from None
    if as_json:
        output.emit_json({"namespace": namespace, "settings": written})
        return
    output.plain(
        f"capacity {namespace}: "
        + ", ".join(
            f"{key}={NO_RATE if value is None else value}" for key, value in written.items()
        )
    )
