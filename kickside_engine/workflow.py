"""Workflows: jobs that wait for other jobs.

Build a workflow from ordinary job builders, name each step, and say what it runs after::

    wf = Workflow("import-42")
    wf.add("fetch", fetch.new({"url": url}))
    wf.add("parse", parse.new({"import": 42}), after=["fetch"])
    wf.add_many("thumb", [thumbnail.new({"page": p}) for p in range(100)], after=["parse"])
    wf.add("notify", notify.new({"import": 42}), after=[After("thumb", on_failure="run")])
    wf.insert(db, conn=conn)  # one transaction: the caller's, like any enqueue

A job whose upstream jobs are not all final is ``waiting``; the settle of its last upstream
releases it in the same transaction, exactly once however many nodes settle upstreams at the
same moment. ``after`` names earlier steps (an ``add_many`` group counts as all of its jobs),
so a workflow cannot have a cycle. When an upstream ends cancelled or discarded, its downstream
is cancelled too (``on_failure="cancel"``, the default) or runs anyway (``"run"``). A
downstream reads its upstreams' results with :func:`upstream_results`. A batch with a final
callback is a workflow with one last step (:func:`batch`).

Operators see and act on a workflow as a whole: :func:`get_workflow`, and
:func:`~kickside_engine.control.workflows.cancel_workflow` and
:func:`~kickside_engine.control.workflows.retry_workflow` (``kickside workflow show|cancel|retry``
on the command line, the job detail's workflow tree in the dashboard).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError

from kickside_engine.clock import ensure_aware, utcnow
from kickside_engine.errors import ConflictError, InvalidArgumentError, NotFoundError
from kickside_engine.ids import parse_uuid
from kickside_engine.job_row import build_row
from kickside_engine.models import JOB_STATES_BY_VALUE, Inserted, Job, JobKind, JobState
from kickside_engine.store.database import Database
from kickside_engine.store.inserts import insert_rows
from kickside_engine.store.notify import local_signal
from kickside_engine.store.workflows import (
    ON_FAILURE,
    WORKFLOW_META,
    insert_steps,
    read_edges,
    read_step,
    read_steps,
    read_upstreams,
    workflow_exists,
)
from kickside_engine.text import validate_name

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

    from kickside_engine.builder import JobBuilder
    from kickside_engine.store.async_database import AsyncDatabase

OnFailure = Literal["cancel", "run"]
#: The most jobs one workflow may hold (its insert is one transaction).
MAX_JOBS = 100_000


@dataclass(frozen=True)
class After:
    """A dependency on an earlier step (or ``add_many`` group), with what to do when one of
    its jobs ends cancelled or discarded: cancel this job (``"cancel"``) or run it anyway
    (``"run"``)."""

    step: str
    on_failure: OnFailure = "cancel"

    def __post_init__(self) -> None:
        if self.on_failure not in ON_FAILURE:
            raise InvalidArgumentError(
                f"on_failure must be 'cancel' or 'run', got {self.on_failure!r}"
            )


@dataclass(frozen=True)
class _Step:
    name: str
    group: str
    builder: JobBuilder
    after: tuple[After, ...]


@dataclass(frozen=True)
class WorkflowInserted:
    """What :meth:`Workflow.insert` wrote: the workflow's id and each step's job id, by step
    name (an ``add_many`` group's jobs as ``thumb[0]``, ``thumb[1]``...)."""

    workflow_id: str
    jobs: dict[str, uuid.UUID]

    def __getitem__(self, step: str) -> uuid.UUID:
        return self.jobs[step]


class Workflow:
    """Jobs that run after other jobs, inserted together (see the module docstring)."""

    def __init__(self, workflow_id: str) -> None:
        self.id = validate_name(workflow_id, "workflow id")
        self._steps: list[_Step] = []
        self._groups: dict[str, list[str]] = {}

    def add(self, name: str, builder: JobBuilder, *, after: Iterable[str | After] = ()) -> Workflow:
        """Add one job as step ``name``, to run once every job of the ``after`` steps is
        final. Returns the workflow, to chain calls."""
        self._new_group(name, [builder], after, group=False)
        return self

    def add_many(
        self, name: str, builders: Sequence[JobBuilder], *, after: Iterable[str | After] = ()
    ) -> Workflow:
        """Add many jobs as the group ``name`` (steps ``name[0]``, ``name[1]``...), each to run
        once every job of the ``after`` steps is final; a later step's ``after=[name]`` waits
        for all of them. Returns the workflow."""
        if isinstance(builders, (str, bytes)) or not isinstance(builders, Sequence):
            raise InvalidArgumentError(f"add_many takes a list of jobs, got {type(builders)}")
        if not builders:
            raise InvalidArgumentError(f"add_many({name!r}) got no jobs")
        self._new_group(name, builders, after, group=True)
        return self

    def _new_group(
        self,
        name: str,
        builders: Sequence[JobBuilder],
        after: Iterable[str | After],
        *,
        group: bool,
    ) -> None:
        validate_name(name, "workflow step name")
        if name in self._groups:
            raise InvalidArgumentError(f"workflow {self.id} already has a step {name!r}")
        if isinstance(after, (str, After)):
            after = [after]
        deps = tuple(a if isinstance(a, After) else After(_step_name(a)) for a in after)
        for dep in deps:
            if dep.step not in self._groups:
                known = ", ".join(self._groups) or "none yet"
                raise InvalidArgumentError(
                    f"step {name!r} runs after {dep.step!r}, which is not an earlier step of "
                    f"workflow {self.id} (earlier steps: {known})"
                )
        if len({d.step for d in deps}) != len(deps):
            raise InvalidArgumentError(f"step {name!r} names an upstream step twice")
        names = [f"{name}[{i}]" for i in range(len(builders))] if group else [name]
        if len(self._steps) + len(names) > MAX_JOBS:
            raise InvalidArgumentError(f"a workflow holds at most {MAX_JOBS} jobs")
        for step_name, builder in zip(names, builders, strict=True):
            _check_builder(builder, step_name)
            self._steps.append(_Step(step_name, name, builder, deps))
        self._groups[name] = names

    def insert(
        self, db: Database, *, conn: Connection | None = None, now: datetime | None = None
    ) -> WorkflowInserted:
        """Insert every job of the workflow in ``conn``'s transaction (the caller's) or one of
        its own: all or none. A workflow id that is already stored is a
        :class:`ConflictError` (also when two inserts race)."""
        if not self._steps:
            raise InvalidArgumentError(f"workflow {self.id} has no steps")
        now = ensure_aware(now, "now") if now is not None else utcnow()
        builders = [s.builder.with_enqueue_meta() for s in self._steps]
        rows, steps, edges = self._rows(builders, now)
        if not db.has_table(db.tables.workflow_step):
            raise ConflictError("workflows need schema revision 0011: run `kickside migrate` first")
        try:
            with db.transaction(conn) as tx:
                if workflow_exists(db, tx, self.id):
                    raise ConflictError(f"workflow {self.id} exists already")
                insert_rows(db, tx, rows)
                insert_steps(db, tx, steps, edges)
        except IntegrityError as exc:
            if "workflow" in str(exc.orig).lower():
                raise ConflictError(f"workflow {self.id} exists already") from None
            raise
        signal = local_signal(db)
        for queue in sorted({r["queue"] for r in rows if r["state"] == "available"}):
            signal.wake(queue)
        _fire_enqueued(builders, rows)
        return WorkflowInserted(self.id, {s["step"]: s["job_id"] for s in steps})

    async def insert_async(
        self,
        adb: AsyncDatabase,
        *,
        conn: AsyncConnection | AsyncSession | None = None,
        now: datetime | None = None,
    ) -> WorkflowInserted:
        """:meth:`insert` from asyncio code, in ``conn``'s transaction or one of its own."""
        return await adb.run(lambda c: self.insert(adb.db, conn=c, now=now), conn=conn)

    def _rows(
        self, builders: Sequence[JobBuilder], now: datetime
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        rows: list[dict[str, Any]] = []
        steps: list[dict[str, Any]] = []
        edges: list[dict[str, Any]] = []
        ids: dict[str, uuid.UUID] = {}
        for step, builder in zip(self._steps, builders, strict=True):
            row = build_row(builder.options, now)
            row["meta"] = {**row["meta"], WORKFLOW_META: {"id": self.id, "step": step.name}}
            ids[step.name] = row["id"]
            upstreams = 0
            for dep in step.after:
                for upstream in self._groups[dep.step]:
                    edges.append(
                        {
                            "downstream_id": row["id"],
                            "upstream_id": ids[upstream],
                            "on_failure": dep.on_failure,
                        }
                    )
                    upstreams += 1
            if upstreams:
                row["state"] = JobState.WAITING.value
            rows.append(row)
            steps.append(
                {
                    "job_id": row["id"],
                    "workflow_id": self.id,
                    "step": step.name,
                    "upstreams": upstreams,
                    "upstreams_pending": upstreams,
                }
            )
        return rows, steps, edges

    def __repr__(self) -> str:
        return f"Workflow({self.id!r}, steps={len(self._steps)})"


def batch(
    workflow_id: str,
    name: str,
    builders: Sequence[JobBuilder],
    *,
    then: JobBuilder,
    on_failure: OnFailure = "run",
) -> Workflow:
    """A batch with a final callback: the jobs of ``builders`` as group ``name``, then
    ``then`` as step ``"then"`` once all of them are final (by default whether or not each
    succeeded: the callback reads their results and states with :func:`upstream_results`)."""
    wf = Workflow(workflow_id)
    wf.add_many(name, builders)
    wf.add("then", then, after=[After(name, on_failure=on_failure)])
    return wf


def _step_name(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"after takes step names or After(...), got {value!r}")
    return value


def _check_builder(builder: Any, step: str) -> None:
    from kickside_engine.builder import JobBuilder

    if not isinstance(builder, JobBuilder):
        raise InvalidArgumentError(f"step {step!r} must be a job builder, got {builder!r}")
    opts = builder.options
    if opts.kind is JobKind.SLOT or opts.identity_key is not None:
        raise InvalidArgumentError(f"step {step!r}: a workflow cannot hold slot or identity jobs")
    if opts.unique is not None:
        raise InvalidArgumentError(
            f"step {step!r}: a workflow cannot hold unique jobs (the workflow id is unique)"
        )


def _fire_enqueued(builders: Sequence[JobBuilder], rows: Sequence[dict[str, Any]]) -> None:
    from kickside_engine.enqueue import fire_enqueued

    fire_enqueued(
        builders,
        [Inserted(id=r["id"], state=JOB_STATES_BY_VALUE[r["state"]]) for r in rows],
    )


# --- reading --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Upstream:
    """An upstream job as its downstream sees it: its step, state and result (None until it
    completed with one)."""

    job_id: uuid.UUID
    step: str
    state: JobState
    result: Any
    on_failure: OnFailure


@dataclass(frozen=True)
class WorkflowStep:
    """One job of a workflow: its step, state and the steps it waits for."""

    job_id: uuid.UUID
    name: str
    state: JobState
    queue: str
    worker: str
    attempt: int
    max_attempts: int
    upstreams: int
    upstreams_pending: int
    inserted_at: datetime
    finalized_at: datetime | None
    #: The job ids this step runs after.
    after: tuple[uuid.UUID, ...] = ()
    #: The last error, already redacted (None: none).
    last_error: str | None = None

    @property
    def group(self) -> str:
        """The ``add_many`` group of the step (its own name for an ``add`` step)."""
        return self.name.split("[", 1)[0]


@dataclass(frozen=True)
class WorkflowView:
    """A workflow as stored: every step with its state, in insertion order."""

    workflow_id: str
    steps: list[WorkflowStep] = field(default_factory=list)

    @property
    def counts(self) -> dict[JobState, int]:
        """How many steps are in each state."""
        counts: dict[JobState, int] = {}
        for step in self.steps:
            counts[step.state] = counts.get(step.state, 0) + 1
        return counts

    @property
    def is_final(self) -> bool:
        """Whether every job of the workflow is final."""
        return all(step.state.is_final for step in self.steps)

    @property
    def state(self) -> str:
        """One word for the whole: ``completed``, ``failed`` (final, some job cancelled or
        discarded), ``executing`` (some job runs) or ``waiting``/``pending``."""
        counts = self.counts
        if self.is_final:
            return "completed" if set(counts) == {JobState.COMPLETED} else "failed"
        if JobState.EXECUTING in counts:
            return "executing"
        pending = set(counts) - {JobState.WAITING, *(s for s in counts if s.is_final)}
        return "pending" if pending else "waiting"


def get_workflow(db: Database, workflow_id: str, *, conn: Connection | None = None) -> WorkflowView:
    """Every job of the workflow with its step and state; :class:`NotFoundError` when no
    workflow has this id."""
    if not db.has_table(db.tables.workflow_step):
        raise NotFoundError(f"workflow {workflow_id} not found (the schema has no workflows)")
    if conn is not None:
        return _read_workflow(db, conn, workflow_id)
    with db.read() as own:
        return _read_workflow(db, own, workflow_id)


def _read_workflow(db: Database, conn: Connection, workflow_id: str) -> WorkflowView:
    rows = read_steps(db, conn, workflow_id)
    if not rows:
        raise NotFoundError(f"workflow {workflow_id} not found")
    after: dict[uuid.UUID, list[uuid.UUID]] = {}
    for edge in read_edges(db, conn, [r.job_id for r in rows]):
        after.setdefault(edge.downstream_id, []).append(edge.upstream_id)
    steps = [
        WorkflowStep(
            job_id=r.job_id,
            name=r.step,
            state=JOB_STATES_BY_VALUE[r.state],
            queue=r.queue,
            worker=r.worker,
            attempt=r.attempt,
            max_attempts=r.max_attempts,
            upstreams=r.upstreams,
            upstreams_pending=r.upstreams_pending,
            inserted_at=r.inserted_at,
            finalized_at=r.finalized_at,
            after=tuple(sorted(after.get(r.job_id, ()))),
            last_error=(r.errors[-1].get("error") if r.errors else None),
        )
        for r in rows
    ]
    return WorkflowView(workflow_id, steps)


def workflow_of(job: Job) -> tuple[str, str] | None:
    """The workflow id and step name of a job, or None for a job outside any workflow."""
    entry = job.meta.get(WORKFLOW_META) if isinstance(job.meta, dict) else None
    if not isinstance(entry, dict):
        return None
    return str(entry.get("id")), str(entry.get("step"))


def upstream_results(
    db: Database, job: Job | uuid.UUID | str, *, conn: Connection | None = None
) -> dict[str, Upstream]:
    """The upstream jobs of a workflow job, by step name, with their states and results: what
    a downstream worker reads (``upstream_results(db, job)["fetch"].result``). Empty for a job
    without upstreams."""
    job_id = job.id if isinstance(job, Job) else parse_uuid(job)
    if job_id is None:
        raise InvalidArgumentError(f"not a job id: {job!r}")
    if not db.has_table(db.tables.workflow_edge):
        return {}
    if conn is not None:
        return _upstreams(db, conn, job_id)
    with db.read() as own:
        return _upstreams(db, own, job_id)


def _upstreams(db: Database, conn: Connection, job_id: uuid.UUID) -> dict[str, Upstream]:
    return {
        r.step: Upstream(r.id, r.step, JOB_STATES_BY_VALUE[r.state], r.result, r.on_failure)
        for r in read_upstreams(db, conn, job_id)
    }


async def upstream_results_async(
    adb: AsyncDatabase,
    job: Job | uuid.UUID | str,
    *,
    conn: AsyncConnection | AsyncSession | None = None,
) -> dict[str, Upstream]:
    """:func:`upstream_results` from asyncio code."""
    return await adb.run(lambda c: upstream_results(adb.db, job, conn=c), conn=conn)


def waiting_on(db: Database, conn: Connection, job_id: uuid.UUID) -> tuple[int, int] | None:
    """For a workflow job: how many of its upstream jobs are not final yet, of how many
    (None for a job outside any workflow)."""
    row = read_step(db, conn, job_id)
    return None if row is None else (row.upstreams_pending, row.upstreams)
