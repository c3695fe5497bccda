"""`kickside audit`: who did what to which job or queue, from which host, newest first."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kickside_engine.control import (
    AUDIT_ACTIONS,
    check_audit_action,
    list_audit,
    parse_uuid,
    redact_value,
)
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, open_database
from kickside_tui.cli.documents import short_time
from kickside_tui.cli.options import JsonOption
from kickside_tui.cli.output import Column


def _target(kind: str, target: str) -> str:
    """``job 651f70d7`` (a job's short id, its full id under --wide) or ``queue mailers``."""
    if kind == "job":
        parsed = parse_uuid(target)
        if parsed is not None:
            return f"job {output.cell(parsed)}"
    return f"{kind} {target}"


@handles_errors
def audit(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", help="Entries per page (1..1000).")] = 50,
    action: Annotated[
        str | None,
        typer.Option(
            "--action",
            metavar="ACTION",
            help=f"Only this action: {', '.join(AUDIT_ACTIONS)} (or one an application records).",
        ),
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="Only this target (a job id, a queue name).")
    ] = None,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Continue after a page.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List the audit trail of operator actions, newest first."""
    db = open_database(ctx)
    if action is not None:
        check_audit_action(db, action)  # a typo is refused, listing the actions
    page = list_audit(db, limit=limit, cursor=cursor, action=action, target=target)
    if as_json:
        output.emit_json({"entries": page.entries, "next_cursor": page.next_cursor})
        return
    output.table(
        None,
        (
            "at (UTC)",
            "actor",
            Column("host", priority=3),
            "action",
            Column("target", flex=True),
            Column("details", priority=2, flex=True),
        ),
        [
            [
                short_time(e.at),
                e.actor,
                e.host,
                e.action,
                _target(e.target_type, e.target),
                json.dumps(redact_value(e.details), ensure_ascii=False),
            ]
            for e in page.entries
        ],
    )
    if page.next_cursor:
        output.plain(f"next page: --cursor {page.next_cursor}")
