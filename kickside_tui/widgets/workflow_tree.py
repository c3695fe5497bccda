"""A workflow as a Rich tree: each step under the step it runs after, with its state. Shared
by ``kickside workflow show`` and the dashboard's job detail."""

from __future__ import annotations

import uuid
from collections import Counter

from rich.markup import escape
from rich.tree import Tree

from kickside_engine import JobState, WorkflowStep, WorkflowView
from kickside_tui.widgets.format import first_line, short_id


def _states(steps: list[WorkflowStep]) -> str:
    counts = Counter(s.state for s in steps)
    return ", ".join(f"{n} {state.value}" for state, n in sorted(counts.items()))


def _label(steps: list[WorkflowStep], folded: bool, current: uuid.UUID | None) -> str:
    first = steps[0]
    here = " [reverse]<- this job[/]" if current in {s.job_id for s in steps} else ""
    if folded and len(steps) > 1:
        return f"[bold]{escape(first.group)}[/] ({len(steps)} jobs): {_states(steps)}{here}"
    label = f"[bold]{escape(first.name)}[/] {first.state.value}"
    if first.state is JobState.WAITING:
        label += f" (waiting on {first.upstreams_pending} of {first.upstreams})"
    label += f" [dim]{escape(first.worker)} {short_id(first.job_id)}[/]"
    if first.last_error and first.state.is_final and first.state is not JobState.COMPLETED:
        label += f" [red]{escape(first_line(first.last_error, 80))}[/]"
    return label + here


def workflow_tree(
    view: WorkflowView, *, folded: bool = True, current: uuid.UUID | None = None
) -> Tree:
    """The workflow as a Rich tree: each node under the step it runs after (its last upstream
    step in insertion order, so every step appears once); ``current`` is marked."""
    by_id = {s.job_id: s for s in view.steps}
    groups: dict[str, list[WorkflowStep]] = {}
    for step in view.steps:
        groups.setdefault(step.group if folded else step.name, []).append(step)
    order = list(groups)
    position = {s.job_id: order.index(s.group if folded else s.name) for s in view.steps}
    parent: dict[str, str | None] = {}
    for key, steps in groups.items():
        ups = {position[u] for s in steps for u in s.after if u in by_id}
        parent[key] = order[max(ups)] if ups else None
    root = Tree(
        f"workflow [bold]{escape(view.workflow_id)}[/]: {view.state} ({_states(view.steps)})"
    )
    nodes: dict[str | None, Tree] = {None: root}
    for key in order:
        nodes[key] = nodes[parent[key]].add(_label(groups[key], folded, current))
    return root
