"""Child processes for the workflow race: settle upstream jobs at one instant, then look.

Spawned by ``tests/engine/test_workflow_race.py``; only plain data crosses the process line.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from kickside_engine import JobState, claim, complete, get_job_statuses

from .slot_procs import TASK_DEADLINE_S, _open


def settle_at(
    url: str, schema: str | None, queue: str, node: str, at: float, watched: Sequence[str]
) -> list[str]:
    """Claim one job of ``queue``, complete it at wall-clock time ``at`` (every child the same
    instant), then read the states of ``watched`` (the round's upstreams first, then its
    downstreams) in one read. Returns what that read saw that must never be: a downstream
    released (available) while an upstream is not final."""
    with _open(url, schema) as db:
        deadline = time.monotonic() + TASK_DEADLINE_S
        while not (claimed := claim(db, queue=queue, node=node, limit=1)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{node}: nothing to claim in {queue}")
            time.sleep(0.005)
        time.sleep(max(0.0, at - time.time()))
        if not complete(db, claimed[0]):
            raise RuntimeError(f"{node}: lost the lease of {claimed[0].job.id}")
        states = get_job_statuses(db, [uuid.UUID(i) for i in watched])
    upstreams, downstreams = watched[: len(watched) // 2], watched[len(watched) // 2 :]
    open_upstreams = [i for i in upstreams if not states[uuid.UUID(i)].is_final]
    early = [
        i for i in downstreams if states[uuid.UUID(i)] is not JobState.WAITING and open_upstreams
    ]
    return [f"{node} saw {i} released with {len(open_upstreams)} upstreams open" for i in early]
