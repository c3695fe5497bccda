"""`kickside doctor`: one health report; exit 1 when any finding needs attention."""

from __future__ import annotations

import typer

from kickside_engine import DatabaseUnavailableError, KicksideError, migrate
from kickside_engine.control import doctor as engine_doctor
from kickside_engine.control import redact_text, redact_value
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, now, state
from kickside_tui.cli.options import JsonOption

_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


@handles_errors
def doctor(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Check the schema, nodes, leases, queues, capacity settings, stuck jobs, tables, NOTIFY.

    Exit 0 when every check is ok, 1 when any warns or fails.
    """
    # Not open_database: an old schema is one of the findings, not a reason to stop. An
    # unreachable database is, though: it exits 5 like every other command.
    db = state(ctx).database()
    try:
        migrate.status(db)
    except DatabaseUnavailableError:
        raise
    except KicksideError:
        pass  # the report's schema finding explains it
    report = engine_doctor(db, now())
    findings = [
        {
            "check": f.check,
            "status": f.status,
            "message": redact_text(f.message),
            "data": redact_value(f.data),
        }
        for f in report.findings
    ]
    if as_json:
        output.emit_json({"ok": report.ok, "findings": findings})
    else:
        for f in findings:
            output.plain(
                f"{_MARK.get(str(f['status']), f['status'])}  {f['check']}: {f['message']}"
            )
    if not report.ok:
        raise typer.Exit(1)
