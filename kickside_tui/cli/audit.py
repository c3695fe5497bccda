"""`kickside audit`: who did what to which job or queue, from which host, newest first."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kickside_engine.control import list_audit
from kickside_engine.redact import redact_value
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, open_database
from kickside_tui.cli.documents import short_time
from kickside_tui.cli.options import JsonOption


@handles_errors
def audit(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", help="Entries per page (1..1000).")] = 50,
    action: Annotated[str | None, typer.Option("--action", help="Only this action "
                                               "(cancel, pause, bulk_retry, ...).")] = None,
    target: Annotated[str | None, typer.Option("--target", help="Only this target "
                                               "(a job id, a queue name).")] = None,
    cursor: Annotated[str | None, typer.Option("--cursor", help="Continue after a page.")]
    = None,
    as_json: JsonOption = False,
) -> None:
    """List the audit trail of operator actions, newest first."""
    page = list_audit(open_database(ctx), limit=limit, cursor=cursor, action=action,
                      target=target)
    if as_json:
        output.emit_json({"entries": page.entries, "next_cursor": page.next_cursor})
        return
    output.table(
        None,
        ("at", "actor", "host", "action", "target", "details"),
        [
            [short_time(e.at), e.actor, e.host, e.action, f"{e.target_type} {e.target}",
             json.dumps(redact_value(e.details), ensure_ascii=False)]
            for e in page.entries
        ],
    )
    if page.next_cursor:
        output.plain(f"next page: --cursor {page.next_cursor}")
