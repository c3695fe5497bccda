"""Reading a test database's jobs and run history in bulk, and checking they agree."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

import sqlalchemy as sa

from kickside_engine import Database

#: Outcomes of an attempt that was ended by someone other than its holder, or by its death.
INTERRUPTED = frozenset({"rescued", "crashed"})


@dataclass
class RunRow:
    """The columns of a run row the fault suites check."""

    attempt: int
    node: str
    outcome: str | None
    settled: bool
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass
class JobHistory:
    """One job and its runs, oldest attempt first."""

    id: str
    state: str
    attempt: int
    lease_owner: str | None
    runs: list[RunRow] = field(default_factory=list)

    @property
    def completed_runs(self) -> list[RunRow]:
        return [r for r in self.runs if r.outcome == "completed"]


def state_counts(db: Database) -> dict[str, int]:
    """How many jobs are in each state."""
    job = db.tables.job
    with db.read() as conn:
        rows = conn.execute(sa.select(job.c.state, sa.func.count()).group_by(job.c.state))
        return {r[0]: r[1] for r in rows}


def node_loaded(db: Database, node: str) -> bool:
    """Whether pool ``node`` has registered, with an executor that loaded its app."""
    table = db.tables.node
    with db.read() as conn:
        version = conn.execute(
            sa.select(table.c.code_version).where(table.c.name == node)
        ).scalar_one_or_none()
    return version not in (None, "pending")


def load_history(db: Database) -> dict[str, JobHistory]:
    """Every job with its runs, keyed by the job id's string form."""
    job, run = db.tables.job, db.tables.job_run
    with db.read() as conn:
        jobs = {
            str(r.id): JobHistory(str(r.id), r.state, r.attempt, r.lease_owner)
            for r in conn.execute(
                sa.select(job.c.id, job.c.state, job.c.attempt, job.c.lease_owner)
            )
        }
        for r in conn.execute(
            sa.select(
                run.c.job_id,
                run.c.attempt,
                run.c.node,
                run.c.outcome,
                run.c.started_at,
                run.c.finished_at,
            ).order_by(run.c.job_id, run.c.attempt, run.c.id)
        ):
            jobs[str(r.job_id)].runs.append(
                RunRow(
                    r.attempt,
                    r.node,
                    r.outcome,
                    r.finished_at is not None,
                    r.started_at,
                    r.finished_at,
                )
            )
    return jobs


def history_problems(jobs: dict[str, JobHistory]) -> list[str]:
    """What is inconsistent between completed jobs and their runs (empty when all is well).

    A completed job has one run per attempt, 1..attempt, all settled; exactly one completed
    run, its last; every earlier run interrupted (rescued or crashed).
    """
    problems: list[str] = []
    for job in jobs.values():
        where = f"job {job.id} (attempt {job.attempt})"
        attempts = [r.attempt for r in job.runs]
        if attempts != list(range(1, job.attempt + 1)):
            problems.append(f"{where}: run attempts {attempts}")
        if not all(r.settled for r in job.runs):
            problems.append(f"{where}: an unsettled run")
        if job.state != "completed":
            continue
        if len(job.completed_runs) != 1 or job.runs[-1].outcome != "completed":
            problems.append(f"{where}: outcomes {[r.outcome for r in job.runs]}")
        if any(r.outcome not in INTERRUPTED for r in job.runs[:-1]):
            problems.append(f"{where}: an earlier run neither rescued nor crashed")
    return problems


def overlapping_runs(jobs: dict[str, JobHistory]) -> list[str]:
    """Descriptions of every pair of one job's runs whose recorded spans overlap.

    The run history's own account of "never on two executors at once": each run, in the
    order it started, began no earlier than the one before it finished (a rescue settles the
    old run at the instant it makes the job claimable again, and a claim stamps ``started_at``
    with a time at or after that). A run that never finished may only be the job's last.
    """
    problems: list[str] = []
    for job in jobs.values():
        runs = sorted(job.runs, key=lambda r: (r.started_at is None, r.started_at, r.attempt))
        for earlier, later in itertools.pairwise(runs):
            where = f"job {job.id}: attempt {later.attempt} on {later.node}"
            if earlier.started_at is None or later.started_at is None:
                problems.append(f"job {job.id}: a run without started_at")
            elif earlier.finished_at is None:
                problems.append(
                    f"{where} started while attempt {earlier.attempt} on {earlier.node} "
                    "was still open"
                )
            elif later.started_at < earlier.finished_at:
                gap = (earlier.finished_at - later.started_at).total_seconds() * 1000
                problems.append(
                    f"{where} started {gap:.1f} ms before attempt {earlier.attempt} "
                    f"on {earlier.node} finished"
                )
    return problems


def outcome_counts(jobs: dict[str, JobHistory]) -> Counter[str | None]:
    """How many runs ended with each outcome."""
    return Counter(r.outcome for job in jobs.values() for r in job.runs)
