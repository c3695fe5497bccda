"""`kickside demo`: a realistic live workload on the configured database."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from kickside_engine import JobState, migrate
from kickside_engine.clock import utcnow
from kickside_engine.metrics import overview
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, state, writes


def demo(
    ctx: typer.Context,
    seconds: Annotated[
        float | None, typer.Option("--seconds", min=1, help="Stop after this long.")
    ] = None,
    dashboard: Annotated[
        bool, typer.Option("--dashboard", help="Open the live dashboard over it.")
    ] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed the traffic generator.")] = None,
) -> None:
    """Run a demo workload (queues, slots, a capacity group, retries, cron, a paused queue)."""
    run_demo(ctx, seconds, dashboard, seed)


@handles_errors
@writes
def run_demo(ctx: typer.Context, seconds: float | None, dashboard: bool, seed: int | None) -> None:
    from kickside_tui.demo.workload import Demo

    cli = state(ctx)
    db = cli.database()
    migrate.upgrade(db)
    show = output.note
    demo = Demo(db, seed=seed, on_error=lambda exc: show(f"demo traffic: {exc}"))
    output.note(f"demo workload on {db.display_url()} (Ctrl-C to stop)")
    demo.start()
    try:
        if dashboard:
            from kickside_tui.adapter import Adapter
            from kickside_tui.app import KicksideApp
            from kickside_tui.demo.workload import SCHEDULE
            from kickside_tui.quiet_logs import kickside_logs_off_the_screen

            with kickside_logs_off_the_screen():
                KicksideApp(Adapter(db, schedule=SCHEDULE)).run()
        else:
            deadline = time.monotonic() + seconds if seconds else None
            while deadline is None or time.monotonic() < deadline:
                time.sleep(min(5.0, max(0.1, (deadline or 1e18) - time.monotonic())))
                ov = overview(db, utcnow())
                output.note(
                    f"completed/min {ov.completed_last_minute}  failed/min "
                    f"{ov.failed_last_minute}  executing {ov.totals[JobState.EXECUTING]}  "
                    f"available {ov.totals[JobState.AVAILABLE]}  nodes {ov.nodes_alive}"
                )
    finally:
        output.note("stopping the demo workload")
        demo.stop()
