"""`kickside workflow show|cancel|retry ID`: a workflow as a tree of steps, and acting on it whole.

``show`` prints each step under the steps it runs after (an ``add_many`` group folded into one
line with its states counted, unless ``--steps``), with its state and, for a waiting step, how
many of its upstreams are not final yet. ``cancel`` previews the jobs it would cancel and asks
(or ``--yes``); it then cancels exactly those that are still open, never more. ``retry`` runs
the cancelled and discarded jobs again, on the same terms.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Annotated, Any

import typer
from rich.markup import escape

from kickside_engine import JobState
from kickside_engine.control import (
    WorkflowView,
    cancel_workflow,
    cancelable,
    get_workflow,
    retry_workflow,
    retryable,
)
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.documents import utc_time
from kickside_tui.cli.options import JsonOption, YesOption
from kickside_tui.widgets.workflow_tree import workflow_tree

app = typer.Typer(help="Show a workflow as a tree of its steps, or cancel or retry it whole.")

IdArgument = Annotated[str, typer.Argument(metavar="ID", help="The workflow's id.")]
StepsOption = Annotated[bool, typer.Option("--steps", help="One line per job (groups unfolded).")]


def workflow_document(view: WorkflowView) -> dict[str, Any]:
    """The workflow as ``--json`` prints it."""
    return {
        "workflow_id": view.workflow_id,
        "state": view.state,
        "counts": {state.value: n for state, n in sorted(view.counts.items())},
        "steps": [
            {
                "job_id": str(s.job_id),
                "step": s.name,
                "group": s.group,
                "state": s.state.value,
                "queue": s.queue,
                "worker": s.worker,
                "attempt": s.attempt,
                "max_attempts": s.max_attempts,
                "upstreams": s.upstreams,
                "upstreams_pending": s.upstreams_pending,
                "after": [str(i) for i in s.after],
                "inserted_at": utc_time(s.inserted_at),
                "finalized_at": utc_time(s.finalized_at) if s.finalized_at else None,
                "last_error": s.last_error,
            }
            for s in view.steps
        ],
    }


@app.command("show")
@handles_errors
def show(
    ctx: typer.Context,
    workflow_id: IdArgument,
    steps: StepsOption = False,
    as_json: JsonOption = False,
) -> None:
    """Show the workflow as a tree: each step with its state, waiting steps with how many
    upstream jobs they wait on."""
    view = get_workflow(open_database(ctx), workflow_id)
    if as_json:
        output.emit_json(workflow_document(view))
        return
    output.render(workflow_tree(view, folded=not steps))


def _act(ctx: typer.Context, workflow_id: str, action: str, yes: bool, as_json: bool) -> None:
    db = open_database(ctx)
    view = get_workflow(db, workflow_id)
    shown: list[uuid.UUID] = cancelable(view) if action == "cancel" else retryable(view)
    if not shown:
        what = "open" if action == "cancel" else "cancelled or discarded"
        if as_json:
            output.emit_json({"workflow_id": workflow_id, "action": action, "changed": []})
        else:
            output.note(f"workflow {workflow_id} has no {what} job: nothing to {action}")
        return
    counts = Counter(s.state.value for s in view.steps if s.job_id in set(shown))
    listed = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
    unless_yes(
        yes, f"{action.capitalize()} {len(shown)} jobs of workflow {workflow_id} ({listed})?"
    )
    change = (cancel_workflow if action == "cancel" else retry_workflow)(
        db, workflow_id, actor(), now(), only=set(shown)
    )
    if as_json:
        output.emit_json(
            {
                "workflow_id": workflow_id,
                "action": action,
                "changed": [str(i) for i in change.changed],
                "workflow": workflow_document(change.workflow),
            }
        )
        return
    if action == "cancel":
        # Jobs downstream of a cancelled one are cancelled by it (their policy), not directly.
        now_cancelled = {s.job_id for s in change.workflow.steps if s.state is JobState.CANCELLED}
        cascade = len((now_cancelled & set(shown)) - set(change.changed))
        also = f" ({cascade} of them by cascade from their upstreams)" if cascade else ""
        output.info(
            f"cancelled {len(now_cancelled & set(shown))} jobs of workflow "
            f"{escape(workflow_id)}{also}"
        )
    else:
        output.info(f"retried {len(change.changed)} jobs of workflow {escape(workflow_id)}")
    output.render(workflow_tree(change.workflow))


@app.command("cancel")
@handles_errors
@writes
def cancel(
    ctx: typer.Context, workflow_id: IdArgument, yes: YesOption = False, as_json: JsonOption = False
) -> None:
    """Cancel every job of the workflow that is not final (executing ones are aborted)."""
    _act(ctx, workflow_id, "cancel", yes, as_json)


@app.command("retry")
@handles_errors
@writes
def retry(
    ctx: typer.Context, workflow_id: IdArgument, yes: YesOption = False, as_json: JsonOption = False
) -> None:
    """Run the workflow's cancelled and discarded jobs again, each after its upstreams."""
    _act(ctx, workflow_id, "retry", yes, as_json)
