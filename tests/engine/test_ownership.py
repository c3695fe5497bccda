"""Whose rows a database holds: found without writing, and only the owner's deleted."""

from __future__ import annotations

import sqlalchemy as sa

from kickside_engine import Database, JobBuilder, enqueue_many, migrate
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, pause_queue
from kickside_engine.control.ownership import Ownership, delete_owned, foreign_rows
from kickside_engine.plugins.cron import Recurring, cron_tick
from kickside_engine.store.nodes import NodeBeat, heartbeat
from kickside_engine.store.settings import set_setting

MINE = Ownership(
    queues=frozenset({"mine-q"}),
    workers=frozenset({"mine.work"}),
    setting_namespaces=frozenset({"mine"}),
    cron_keys=frozenset({"mine.tick"}),
)
ACTOR = Actor("someone", "host")
NEW_IN_0004 = ("workers", "schedule")


def _fill(db: Database, *, queue: str, worker: str, namespace: str, cron: str, node: str) -> None:
    now = utcnow()
    enqueue_many(db, [JobBuilder(worker, {"n": n}).queue(queue) for n in range(2)])
    pause_queue(db, queue, ACTOR, now)
    set_setting(db, namespace, "limit", 3, updated_by="someone", now=now)
    cron_tick(
        db,
        [Recurring(cron, "* * * * *", lambda: JobBuilder(worker, {}).queue(queue))],
        now.replace(second=0, microsecond=0),
    )
    heartbeat(db, NodeBeat(node, "host", 1, {queue: 2}, None, 0, 2, now), now)


def _count(db: Database, table: sa.Table) -> int:
    with db.read() as conn:
        found: int = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
        return found


def test_a_database_kickside_never_migrated_holds_nothing_of_anyones(empty_db: Database) -> None:
    found = foreign_rows(empty_db, MINE)
    assert found.foreign == [] and not found.migrated


def test_only_the_owners_names_are_its_own(db: Database) -> None:
    _fill(db, queue="mine-q", worker="mine.work", namespace="mine", cron="mine.tick", node="n1")
    assert foreign_rows(db, MINE).foreign == []
    _fill(db, queue="billing", worker="charge", namespace="app", cron="nightly", node="web-1")
    found = {rows.kind: rows for rows in foreign_rows(db, MINE).foreign}
    assert found["jobs"].describe() == "3 jobs (charge in billing)"  # two, and cron's one
    assert found["queues"].describe() == "1 queue (billing)"
    assert found["settings"].describe() == "1 setting (app)"
    assert found["cron runs"].describe() == "1 cron run (nightly)"
    assert found["nodes"].describe() == "1 node (web-1 serving billing)"
    assert found["audit entries"].describe() == "1 audit entry (queue billing)"
    assert list(found) == ["jobs", "queues", "settings", "nodes", "cron runs", "audit entries"]


def test_a_job_of_another_worker_in_an_owned_queue_is_not_the_owners(db: Database) -> None:
    enqueue_many(db, [JobBuilder("intruder", {}).queue("mine-q")])
    (rows,) = foreign_rows(db, MINE).foreign
    assert rows.describe() == "1 job (intruder in mine-q)"


def test_tables_beside_kicksides_are_an_applications(db: Database) -> None:
    name = f'"{db.schema}".orders' if db.schema else "orders"
    with db.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {name} (id INTEGER PRIMARY KEY)"))
    (rows,) = foreign_rows(db, MINE).foreign
    assert rows.describe() == "1 table (orders)"


def test_a_database_at_an_older_revision_is_judged_before_it_is_upgraded(
    empty_db: Database,
) -> None:
    migrate.upgrade(empty_db, migrate.revisions()[-2])  # nodes had no workers column yet
    now = utcnow()
    node = empty_db.tables.node
    old = sa.Table(
        node.name,
        sa.MetaData(schema=empty_db.schema),
        *(sa.Column(c.name, c.type) for c in node.c if c.name not in NEW_IN_0004),
    )
    with empty_db.begin(check_schema=False) as conn:  # a row the older revision wrote
        conn.execute(
            old.insert().values(
                name="web-1",
                host="h",
                pid=1,
                queues={"billing": 1},
                executors_busy=0,
                executors_total=1,
                started_at=now,
                heartbeat_at=now,
            )
        )
    (rows,) = foreign_rows(empty_db, MINE).foreign
    assert rows.describe() == "1 node (web-1 serving billing)"


def test_delete_owned_keeps_every_row_that_is_not_the_owners(db: Database) -> None:
    _fill(db, queue="mine-q", worker="mine.work", namespace="mine", cron="mine.tick", node="n1")
    _fill(db, queue="billing", worker="charge", namespace="app", cron="nightly", node="web-1")
    before = foreign_rows(db, MINE).foreign
    deleted = delete_owned(db, MINE)
    assert deleted == {
        "runs": 0,
        "jobs": 3,
        "queues": 1,
        "settings": 1,
        "nodes": 1,
        "cron runs": 1,
        "audit entries": 1,
    }
    assert foreign_rows(db, MINE).foreign == before
    t = db.tables
    assert [
        _count(db, table)
        for table in (t.job, t.queue, t.setting, t.node, t.recurring_execution, t.audit)
    ] == [3, 1, 2, 1, 1, 1]  # the settings: the app's, and the migrations' own record
