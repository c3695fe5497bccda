"""`kickside explain ID`: why a job is not executing now, one reason per line."""

from __future__ import annotations

import typer

from kickside_engine.control import explain as engine_explain
from kickside_engine.control import redact_text, redact_value
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, job_id, now, open_database
from kickside_tui.cli.options import JobIdArgument, JsonOption


@handles_errors
def explain(ctx: typer.Context, ident: JobIdArgument, as_json: JsonOption = False) -> None:
    """Explain why job ID is not running now (or that it is), one reason per line."""
    result = engine_explain(open_database(ctx), job_id(ctx, ident), now=now())
    reasons = [
        {"code": r.code, "message": redact_text(r.message), "data": redact_value(r.data)}
        for r in result.reasons
    ]
    if as_json:
        output.emit_json({"job_id": result.job_id, "state": result.state, "reasons": reasons})
        return
    output.plain(f"job {result.job_id} is {result.state.value}")
    if not reasons:
        output.plain("nothing keeps it from running")
    for r in reasons:
        output.plain(f"- {r['code']}: {r['message']}")
