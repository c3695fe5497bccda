"""listen(): changes committed anywhere reach a subscriber (PostgreSQL; on a SQLite file through
its wake socket, tested across processes in tests/runtime/test_cross_process_wakes.py); a
payload is delivered when, and only if, its transaction commits; a lost connection is
re-established; stop() ends it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, enqueue
from kickside_engine.audit import record_audit
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, pause_queue
from kickside_engine.store.listen import Subscription, listen
from kickside_engine.store.notify import channel_name

from ..conftest import PG_URL, Target
from ..support.retry_log import assert_backs_off, retry_log
from ..support.tcp_proxy import Proxy

TIMEOUT = 15.0


class Inbox:
    """Payloads received, with a way to wait for one."""

    def __init__(self) -> None:
        self.payloads: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, payload: str) -> None:
        with self._cond:
            self.payloads.append(payload)
            self._cond.notify_all()

    def wait_for(self, payload: str) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: payload in self.payloads, TIMEOUT):
                raise AssertionError(f"{payload!r} never arrived; got {self.payloads}")


@pytest.fixture
def other(target: Target, db: Database) -> Iterator[Database]:
    """A second handle on the test database: another process's connections, in effect."""
    handle = target.open()
    try:
        yield handle
    finally:
        handle.dispose()


@pytest.fixture
def subscribe(db: Database) -> Iterator[Callable[[Inbox], Subscription]]:
    started: list[Subscription] = []

    def start(inbox: Inbox) -> Subscription:
        sub = listen(db, inbox)
        started.append(sub)
        assert sub.connected.wait(TIMEOUT), "the subscription never connected"
        return sub

    yield start
    for sub in started:
        sub.stop()


def _eventually(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` every 50 ms, failing after TIMEOUT seconds."""
    for _ in range(int(TIMEOUT / 0.05)):
        if condition():
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _listening_pids(db: Database) -> list[int]:
    with db.read() as conn:
        return list(
            conn.execute(
                sa.text("SELECT pid FROM pg_stat_activity WHERE query = :q"),
                {"q": f'LISTEN "{channel_name(db)}"'},
            ).scalars()
        )


def test_commits_of_another_connection_are_delivered(
    db: Database, other: Database, subscribe: Callable[[Inbox], Subscription]
) -> None:
    if not db.is_postgresql:
        pytest.skip("only PostgreSQL carries notifications between processes")
    inbox = Inbox()
    subscribe(inbox)
    enqueue(other, JobBuilder("ok", {}).queue("mailers"))
    inbox.wait_for("mailers")
    pause_queue(other, "mailers", Actor("oncall", "ops"), utcnow())
    inbox.wait_for("audit:pause")


def test_a_lost_connection_is_reestablished(
    db: Database, other: Database, subscribe: Callable[[Inbox], Subscription]
) -> None:
    if not db.is_postgresql:
        pytest.skip("SQLite has no connection to lose")
    inbox = Inbox()
    subscribe(inbox)
    (old,) = _listening_pids(db)
    with other.begin() as conn:
        conn.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": old})
    _eventually(
        lambda: old not in (pids := _listening_pids(db)) and len(pids) == 1,
        "the subscription to reconnect",
    )
    enqueue(other, JobBuilder("ok", {}).queue("after"))
    inbox.wait_for("after")


def test_a_stopped_subscription_hears_nothing_more(
    db: Database, other: Database, subscribe: Callable[[Inbox], Subscription]
) -> None:
    stopped, live = Inbox(), Inbox()
    first = subscribe(stopped)
    subscribe(live)
    first.stop()
    assert first.stopped and not first.connected.is_set()
    # On SQLite only this process's own changes are heard: enqueue through ``db`` itself.
    enqueue(other if db.is_postgresql else db, JobBuilder("ok", {}).queue("late"))
    live.wait_for("late")  # delivered to the live subscription, so it was sent
    assert "late" not in stopped.payloads
    if db.is_postgresql:  # its connection is closed
        _eventually(lambda: len(_listening_pids(db)) == 1, "the stopped connection to close")


def test_on_sqlite_this_processs_own_wakes_are_delivered(
    db: Database, subscribe: Callable[[Inbox], Subscription]
) -> None:
    if not db.is_sqlite:
        pytest.skip("the in-process signal path is SQLite's")
    inbox = Inbox()
    subscribe(inbox)
    enqueue(db, JobBuilder("ok", {}).queue("local"))
    inbox.wait_for("local")


def test_an_action_is_delivered_once_committed_and_never_when_rolled_back(
    db: Database, subscribe: Callable[[Inbox], Subscription]
) -> None:
    """NOTIFY's rule on PostgreSQL; on SQLite the payload waits on the connection for the
    commit (and a rollback drops it)."""
    inbox = Inbox()
    subscribe(inbox)
    actor = Actor("oncall", "ops")
    with pytest.raises(RuntimeError), db.begin() as conn:
        record_audit(db, conn, actor, "rolled_back", "queue", "q", {}, utcnow())
        raise RuntimeError("the change fails")
    with db.begin() as conn:
        record_audit(db, conn, actor, "committed", "queue", "q", {}, utcnow())
        assert "audit:committed" not in inbox.payloads, "delivered before the commit"
    inbox.wait_for("audit:committed")
    enqueue(db, JobBuilder("ok", {}).queue("after"))  # anything still queued arrives first
    inbox.wait_for("after")
    assert "audit:rolled_back" not in inbox.payloads


def test_a_subscription_cut_off_backs_off_and_starts_over_once_back(
    db: Database, target: Target
) -> None:
    """Cut off (through a proxy that refuses connections), a subscription retries after 0.1 s,
    0.2 s, 0.4 s... waiting each delay out; back, it hears notifications again, and the next
    outage starts the schedule over from 0.1 s."""
    if not db.is_postgresql:
        pytest.skip("SQLite has no connection to lose")
    proxy = Proxy.for_url(PG_URL)
    behind = Target("postgresql", proxy.url(target.url), target.schema).open()
    inbox = Inbox()
    with retry_log("kickside.listen") as retries:
        sub = listen(behind, inbox)
        try:
            assert sub.connected.wait(TIMEOUT), "the subscription never connected"
            proxy.down()
            _eventually(lambda: len(retries.since(0)) >= 6, "six retries")
            assert_backs_off(retries.since(0)[:6])
            proxy.up()
            assert sub.connected.wait(TIMEOUT), "the subscription never reconnected"
            enqueue(db, JobBuilder("ok", {}).queue("back"))
            inbox.wait_for("back")
            seen = len(retries.since(0))
            proxy.down()
            _eventually(lambda: len(retries.since(seen)) >= 3, "three retries")
            assert_backs_off(retries.since(seen)[:3])  # from 0.1 s again
        finally:
            proxy.up()
            sub.stop()
            proxy.close()
            behind.dispose()
