"""Writing running jobs' progress: one batch per pool tick, fenced by the lease.

The pool gathers what its executors sent (at most one value per job per second, see
:mod:`kickside_engine.progress`) and writes it here in one transaction. Each row is filtered as
a lease renewal is (executing, this node, this token): a job cancelled, rescued or settled
meanwhile keeps what it has. The attempt's last value is written by the settle instead
(:func:`kickside_engine.lifecycle.settlement_for`), and a claim clears the column.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from sqlalchemy import bindparam, update

from kickside_engine.models import JobState
from kickside_engine.store.database import Database
from kickside_engine.store.tables import Tables, state_literal

#: A comment every progress write carries (in ``pg_stat_statements``, logs, and tests that
#: count the writes).
PROGRESS_WRITE_MARK = "/* kickside:progress */"


@lru_cache(maxsize=16)
def _progress_update(tables: Tables) -> Any:
    job = tables.job
    return (
        update(job)
        .prefix_with(PROGRESS_WRITE_MARK)
        .where(
            job.c.state == state_literal(JobState.EXECUTING.value),
            job.c.lease_owner == bindparam("p_node", type_=job.c.lease_owner.type),
            job.c.lease_token == bindparam("p_token", type_=job.c.lease_token.type),
        )
        .values(progress=bindparam("p_progress", type_=job.c.progress.type))
    )


def write_progress(db: Database, *, node: str, progress: Mapping[uuid.UUID, Any]) -> None:
    """Store each lease token's latest progress on its job, if this node still holds it.

    One transaction and one (executemany) statement for the whole batch; ``progress`` values
    are already checked (:func:`kickside_engine.progress.storable_progress`).
    """
    if not progress:
        return
    rows = [{"p_node": node, "p_token": t, "p_progress": v} for t, v in progress.items()]
    with db.begin() as conn:
        conn.execute(_progress_update(db.tables), rows)
