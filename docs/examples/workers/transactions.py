"""Enqueue in the caller's transaction: the job commits, or rolls back, with your own data."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, func, select

from kickside_engine import (
    Job,
    JobBuilder,
    WorkerRegistry,
    connect_database,
    enqueue_fanout,
    enqueue_many,
    migrate,
)
from kickside_engine.testing import assert_enqueued, refute_enqueued

registry = WorkerRegistry()
orders = Table(
    "orders", MetaData(), Column("id", Integer, primary_key=True), Column("email", String)
)


@registry.worker("deliver_receipt", queue="mailers")
def deliver_receipt(args: dict[str, Any], job: Job) -> None: ...


db = connect_database()
migrate.upgrade(db)
orders.create(db.engine, checkfirst=True)  # the application's own table, same database

with db.begin() as conn:  # a SQLAlchemy Connection in a transaction
    conn.execute(orders.insert().values(id=42, email="ada@example.com"))
    deliver_receipt.new({"order_id": 42}).insert(db, conn=conn)
assert_enqueued(db, worker="deliver_receipt", args={"order_id": 42})

try:
    with db.begin() as conn:
        conn.execute(orders.insert().values(id=43, email="bob@example.com"))
        deliver_receipt.new({"order_id": 43}).insert(db, conn=conn)
        raise RuntimeError("payment declined")  # the transaction rolls back: no order, no job
except RuntimeError:
    pass
refute_enqueued(db, worker="deliver_receipt", args={"order_id": 43})

# Many jobs at once, all or none: any mix of builders, or one template fanned out over args.
enqueue_many(db, [deliver_receipt.new({"order_id": 44}), JobBuilder("audit_order", {"id": 44})])
enqueue_fanout(db, deliver_receipt.new(), [{"order_id": n} for n in range(100, 110)])
with db.read() as conn:
    print(conn.execute(select(func.count()).select_from(orders)).scalar_one(), "order(s)")
assert_enqueued(db, worker="deliver_receipt", count=12)
