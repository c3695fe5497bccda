"""A stateful property test: any interleaving of API calls keeps every job in a possible state.

Hypothesis drives a small world through the public API (enqueue, claim, complete, fail,
operator actions, wakes, parks, purges, bulk actions) and the maintenance plugins (Stager,
Lifeline, Pruner) in random order. After every step no job may be in an impossible state, every
state change observed must be one that ``models.TRANSITIONS`` allows (the state machine's one
authority), and an outcome from a claim whose lease was lost (rescued, cancelled, re-claimed)
must be dropped.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from kickside_engine import (
    ClaimedJob,
    ConflictError,
    Database,
    JobBuilder,
    JobState,
    Unique,
    claim,
    complete,
    control,
    enqueue,
    fail,
    get_job,
    purge_slot,
    wake_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, JobFilter
from kickside_engine.models import TRANSITIONS
from kickside_engine.plugins.lifeline import rescue_expired
from kickside_engine.plugins.pruner import prune
from kickside_engine.plugins.stager import stage
from kickside_engine.slots import disable_slot, enable_slot, park_job

from .support import PROPERTY, assert_consistent, attempt

ME = Actor("machine", "localhost")
KEYS = ("a", "b", "c")
ACTIONS = ("retry", "cancel", "discard", "delete", "wake", "park", "enable", "disable")


def _act(db: Database, action: str, job_id: uuid.UUID) -> Any:
    now = utcnow()
    calls = {
        "retry": lambda: control.retry_job(db, job_id, ME, now),
        "cancel": lambda: control.cancel_job(db, job_id, ME, now),
        "discard": lambda: control.discard_job(db, job_id, ME, now),
        "delete": lambda: control.delete_job(db, job_id, ME, now),
        "wake": lambda: wake_job(db, job_id, now=now, actor=ME),
        "park": lambda: park_job(db, job_id, now=now, actor=ME),
        "enable": lambda: enable_slot(db, job_id, now=now, actor=ME),
        "disable": lambda: disable_slot(db, job_id, now=now, actor=ME),
    }
    return attempt(calls[action])


def make_machine(db: Database) -> type[RuleBasedStateMachine]:
    """A machine class bound to ``db`` (each run adds to what earlier runs left)."""

    class JobWorld(RuleBasedStateMachine):
        jobs = Bundle("jobs")

        def __init__(self) -> None:
            super().__init__()
            # Each run works in a queue and a slot namespace of its own, so what earlier runs
            # left in the shared database never changes what this one sees.
            self.queue = f"m_{uuid.uuid4().hex[:12]}"
            self.claimed: list[ClaimedJob] = []
            self.states: dict[uuid.UUID, JobState] = {}

        def builder(self, args: dict[str, Any]) -> JobBuilder:
            return JobBuilder("ok", {**args, "run": self.queue}).queue(self.queue)

        @initialize(target=jobs)
        def first_job(self) -> uuid.UUID:
            return enqueue(db, self.builder({"n": 0}).max_attempts(2)).id

        @rule(
            target=jobs,
            max_attempts=st.integers(1, 3),
            later=st.booleans(),
            unique=st.booleans(),
        )
        def enqueue_one_shot(self, max_attempts: int, later: bool, unique: bool) -> uuid.UUID:
            builder = self.builder({"n": 1}).max_attempts(max_attempts)
            if later:
                builder = builder.schedule_in(timedelta(minutes=5))
            if unique:
                builder = builder.unique(Unique.args())
            return enqueue(db, builder).id

        @rule(target=jobs, key=st.sampled_from(KEYS), demand=st.booleans())
        def enroll_slot(self, key: str, demand: bool) -> uuid.UUID:
            builder = self.builder({"key": key}).slot(self.queue, "slots", key, demand=demand)
            result = attempt(lambda: enqueue(db, builder))
            if isinstance(result, ConflictError):  # a final slot holds the identity
                return uuid.uuid4()
            assert not isinstance(result, Exception), result
            return result.id

        @rule(limit=st.integers(1, 3))
        def claim_some(self, limit: int) -> None:
            lease = timedelta(minutes=10)
            for claimed in claim(db, queue=self.queue, node="machine", limit=limit, lease=lease):
                assert claimed.job.state is JobState.EXECUTING
                self.claimed.append(claimed)

        @rule(data=st.data(), outcome=st.sampled_from(("complete", "fail")))
        def settle_a_claim(self, data: Any, outcome: str) -> None:
            if not self.claimed:
                return
            claimed = self.claimed.pop(data.draw(st.integers(0, len(self.claimed) - 1)))
            current = get_job(db, claimed.job.id)
            holds = (
                current is not None
                and current.state is JobState.EXECUTING
                and current.lease_token == claimed.lease_token
            )
            if outcome == "complete":
                recorded = complete(db, claimed)
            else:
                recorded = fail(db, claimed, "RuntimeError: boom token=not-a-token")
            # Fencing: only the lease holder's outcome counts; a late one changes nothing.
            assert recorded == holds, (outcome, current)
            if not holds:
                assert get_job(db, claimed.job.id) == current

        @rule(job_id=jobs, action=st.sampled_from(ACTIONS))
        def operator_action(self, job_id: uuid.UUID, action: str) -> None:
            _act(db, action, job_id)

        @rule(action=st.sampled_from(("retry", "cancel", "discard")), batch=st.integers(1, 3))
        def bulk_action(self, action: str, batch: int) -> None:
            flt = JobFilter(queues=(self.queue,))
            preview = control.bulk_preview(db, action, flt)
            control.bulk_apply(db, preview, ME, utcnow(), batch=batch)

        @rule(key=st.sampled_from(KEYS))
        def purge(self, key: str) -> None:
            attempt(lambda: purge_slot(db, namespace=self.queue, scope="slots", key=key, actor=ME))

        # Nothing is due within a minute; everything (leases, backoffs, schedules) in two hours.
        @rule(minutes=st.sampled_from((1, 120)))
        def maintenance(self, minutes: int) -> None:
            later = utcnow() + timedelta(minutes=minutes)
            stage(db, later)
            rescue_expired(db, later)
            prune(db, later + timedelta(days=8))

        @invariant()
        def consistent(self) -> None:
            assert_consistent(db)

        @invariant()
        def every_change_is_an_allowed_transition(self) -> None:
            now = self.observed_states()
            for job_id, state in now.items():
                before = self.states.get(job_id)
                if before is not None and before is not state:
                    assert state in TRANSITIONS[before], (job_id, before, state)
            self.states = now

        def observed_states(self) -> dict[uuid.UUID, JobState]:
            job = db.tables.job
            with db.read() as conn:
                rows = conn.execute(
                    sa.select(job.c.id, job.c.state).where(job.c.queue == self.queue)
                ).all()
            return {r.id: JobState(r.state) for r in rows}

    return JobWorld


def test_any_sequence_of_calls_keeps_jobs_consistent(db: Database) -> None:
    machine = make_machine(db)
    run_state_machine_as_test(
        machine,
        settings=settings(
            PROPERTY, max_examples=max(8, PROPERTY.max_examples // 3), stateful_step_count=20
        ),
    )
