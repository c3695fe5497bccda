"""The column values of a job reaching a final state, whoever finishes it: its lease holder
(:mod:`kickside_engine.lifecycle`), an operator, the Lifeline, or a workflow whose upstream
failed (:mod:`kickside_engine.store.workflows`). Pure: no database here.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kickside_engine.models import Job, JobKind, JobState

_FINAL_AT = {
    JobState.COMPLETED: "completed_at",
    JobState.CANCELLED: "cancelled_at",
    JobState.DISCARDED: "discarded_at",
}


def final_values(
    state: JobState,
    now: datetime,
    *,
    meta: dict[str, Any],
    kind: JobKind,
    namespace: str | None,
    scope: str | None,
    identity_key: str | None,
) -> dict[str, Any]:
    """The column values of a job reaching final ``state`` at ``now``, whoever finishes it.

    The unique key is released unless ``meta.unique_states == "all"``, and a finished one-shot
    job releases its identity for the next one (kept in ``meta["identity"]`` for history).
    """
    values: dict[str, Any] = {"state": state.value, "finalized_at": now, _FINAL_AT[state]: now}
    if meta.get("unique_states") != "all":
        values["unique_key"] = None
    if namespace is not None and kind is JobKind.ONESHOT:
        values.update(namespace=None, scope=None, identity_key=None)
        values["meta"] = {**meta, "identity": [namespace, scope, identity_key]}
    return values


def final_values_of(job: Job, state: JobState, now: datetime) -> dict[str, Any]:
    """:func:`final_values` for ``job`` as read (a settled run's or an operator's)."""
    return final_values(
        state,
        now,
        meta=job.meta,
        kind=job.kind,
        namespace=job.namespace,
        scope=job.scope,
        identity_key=job.identity_key,
    )
