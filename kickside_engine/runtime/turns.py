"""Turns: the pool's trips to the database. A turn records the outcomes that arrived since the
last one and claims the next jobs, together: in one transaction on SQLite, and on PostgreSQL
usually in one statement, the outcomes riding along the first claim.

An outcome not yet recorded when the pool dies means a re-run, never a loss.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from kickside_engine.clock import utcnow
from kickside_engine.models import ClaimedJob
from kickside_engine.runtime.config import PoolConfig
from kickside_engine.store.claims import claim_jobs, close_turn_connection, open_turn_connection
from kickside_engine.store.database import Database, translate_errors
from kickside_engine.store.keyed_claims import claim_keyed, due_keyed_job_waits
from kickside_engine.store.settle import Settlement, UnnestSettle, settle_batch, unnest_settle


@dataclass
class ClaimPlan:
    """How much a turn may claim: ``(queue, share)`` in claim order, and ``room`` for all."""

    shares: list[tuple[str, int]]
    room: int


@dataclass
class Turn:
    """One trip to the database: outcomes to record and, unless ``plan`` is None, claims."""

    pending: list[Settlement]
    plan: ClaimPlan | None
    version: str | None
    #: The workers the claimed jobs may be for: those of the code they will run under.
    workers: list[str] | None = None
    began: float = field(default_factory=time.monotonic)


@dataclass
class TurnResult:
    """What a turn committed: the first ``settled`` outcomes and the claimed batches."""

    since: float  # monotonic, just before the claims: their leases run from here
    now: datetime
    settled: int = 0
    batches: list[tuple[str, list[ClaimedJob]]] = field(default_factory=list)
    full: bool = False  # some queue filled its share: there may be more to claim
    error: Exception | None = None


class TurnRunner:
    """Runs turns for one node: records ``Turn.pending`` and claims along ``Turn.plan``.

    It runs on the producer's store thread or on the loop's, one turn at a time, and touches
    nothing of the pool: its only state is its own, the PostgreSQL turn connection and the
    keyed-claim probe times.
    """

    def __init__(self, db: Database, config: PoolConfig, node: str) -> None:
        self.db = db
        self.config = config
        self.node = node
        self._conn: Connection | None = None
        self._keyed_found: dict[str, bool] = {}
        self._keyed_probe_at: dict[str, float] = {}

    def run(self, turn: Turn) -> TurnResult:
        """Run ``turn``; a failure comes back in ``TurnResult.error``, with what committed
        before it."""
        done = TurnResult(since=time.monotonic(), now=utcnow())
        try:
            if self.db.is_postgresql:
                self._turn_postgresql(turn, done)
            else:
                self._turn_sqlite(turn, done)
        except Exception as exc:
            done.error = exc
        return done

    def _turn_sqlite(self, turn: Turn, done: TurnResult) -> None:
        """One transaction: the outcomes and the claims commit together (or not at all)."""
        claimed = TurnResult(since=done.since, now=done.now)
        with self.db.begin() as conn:
            # Read once the write lock is held (BEGIN IMMEDIATE): the claims' runs must not
            # appear to start before outcomes committed while this turn waited for the lock.
            claimed.now = utcnow()
            if turn.pending:
                settle_batch(self.db, conn, turn.pending)
            if turn.plan is not None:
                self._claim_plan(conn, turn, claimed)
        done.settled = len(turn.pending)
        done.batches, done.full, done.now = claimed.batches, claimed.full, claimed.now

    def _turn_postgresql(self, turn: Turn, done: TurnResult) -> None:
        """Record and claim in as few round trips as possible: usually exactly one.

        Outcomes that fit one statement ride along the first claim on an autocommit
        connection (one statement, one commit); others are recorded first in their own
        transaction. Keyed claims (advisory locks) keep a transaction of their own. Each
        statement commits by itself, so ``done`` counts what committed before any failure.
        """
        pending = turn.pending
        inline = unnest_settle(self.db, pending)
        if pending and inline is None:
            with self.db.begin() as conn:
                settle_batch(self.db, conn, pending)
            done.settled = len(pending)
            pending = []
        done.since, done.now = time.monotonic(), utcnow()  # the claims' leases run from here
        with translate_errors(self.db):
            try:
                conn = self._connection()
                settled = False
                if turn.plan is not None:
                    settled = self._claim_plan(conn, turn, done, settle=inline)
                if inline is not None and not settled:  # no claim to ride along
                    settle_batch(self.db, conn, pending)
                    done.settled = len(turn.pending)
            except BaseException:
                self.close_connection()  # the next turn starts on a fresh one
                raise

    def _connection(self) -> Connection:
        """The autocommit connection PostgreSQL turns run on, kept from one turn to the next.

        Checking a connection out and switching it to autocommit for every turn cost about as
        much client CPU as the claim statement itself.
        """
        if self._conn is None:
            self._conn = open_turn_connection(self.db)
        return self._conn

    def close_connection(self) -> None:
        """Close the turn connection (not while a turn runs on it); the next turn opens one."""
        conn, self._conn = self._conn, None
        if conn is not None:
            close_turn_connection(conn)

    def _claim_plan(
        self, conn: Any, turn: Turn, done: TurnResult, *, settle: UnnestSettle | None = None
    ) -> bool:
        """Claim along ``turn.plan`` through ``conn``; returns whether ``settle`` committed.

        ``settle`` (PostgreSQL, ``conn`` autocommitting: all of ``turn.pending``) rides along
        the first claim.
        """
        assert turn.plan is not None
        room = turn.plan.room
        settled = False
        for queue, share in turn.plan.shares:
            free = min(share, room)
            if free <= 0:
                break
            batch = claim_jobs(
                self.db,
                conn,
                queue=queue,
                node=self.node,
                limit=free,
                now=done.now,
                lease=self.config.lease_for(queue),
                code_version=turn.version,
                settle=None if settled else settle,
                workers=turn.workers,
            )
            if settle is not None and not settled:
                done.settled = len(turn.pending)  # committed with this claim
                settled = True
            done.batches.append((queue, batch))
            got = len(batch)
            if got < free and self._probe_keyed(queue) and self._keyed_waits(conn, queue, turn):
                # A PostgreSQL claim reads its own time, after the admission lock; SQLite's
                # turn read it once the write lock was held.
                now = None if self.db.is_postgresql else done.now
                if self.db.is_postgresql:  # advisory locks need a transaction: conn has none
                    with self.db.begin() as tx:
                        keyed = self._claim_keyed(tx, queue, free - got, turn, now)
                else:
                    keyed = self._claim_keyed(conn, queue, free - got, turn, now)
                done.batches.append((queue, keyed))
                got += len(keyed)
            room -= got
            done.full = done.full or got == free
        return settled

    def _claim_keyed(
        self, conn: Any, queue: str, limit: int, turn: Turn, now: datetime | None
    ) -> list[ClaimedJob]:
        keyed = claim_keyed(
            self.db,
            conn,
            queue=queue,
            node=self.node,
            limit=limit,
            now=now,
            lease=self.config.lease_for(queue),
            code_version=turn.version,
            workers=turn.workers,
        )
        self._keyed_found[queue] = bool(keyed)
        return keyed

    def _keyed_waits(self, conn: Any, queue: str, turn: Turn) -> bool:
        waits = due_keyed_job_waits(self.db, conn, queue=queue, now=utcnow(), workers=turn.workers)
        if not waits:
            self._keyed_found[queue] = False
        return waits

    def _probe_keyed(self, queue: str) -> bool:
        """Whether to look for keyed jobs now: always while they turn up, else once a second.

        Keyed claims cost an extra query; a queue without keyed jobs should not pay it on
        every claim.
        """
        mono = time.monotonic()
        if self._keyed_found.get(queue) or mono >= self._keyed_probe_at.get(queue, 0.0):
            self._keyed_probe_at[queue] = mono + 1.0
            return True
        return False
