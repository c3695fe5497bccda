"""Nodes publish their executors by kind with busy and total slots; older pools (no kinds
published, or a schema without the column) read as process executors, as before."""

from __future__ import annotations

from datetime import UTC, datetime

from kickside_engine import Database, migrate
from kickside_engine.control import ExecutorKind, list_nodes
from kickside_engine.store.nodes import NodeBeat, heartbeat

KINDS = [
    {"kind": "process", "executors": 8, "busy": 3, "slots": 8},
    {"kind": "async", "executors": 2, "busy": 120, "slots": 200},
]


def _beat(name: str, now: datetime, executors: list[dict[str, object]] | None) -> NodeBeat:
    return NodeBeat(name, "h", 1, {"default": 8}, "v1", 4, 10, now, executors=executors)


def test_a_node_publishes_its_executors_by_kind_with_busy_and_total_slots(db: Database) -> None:
    now = datetime.now(UTC)
    heartbeat(db, _beat("n1", now, KINDS), now)
    [node] = list_nodes(db, now)
    assert node.executors == (
        ExecutorKind("process", 8, 3, 8),
        ExecutorKind("async", 2, 120, 200),
    )
    assert [str(k) for k in node.executors] == ["process 3/8", "async 120/200"]
    assert (node.executors_busy, node.executors_total) == (4, 10)  # as before


def test_a_pool_that_publishes_no_kinds_shows_its_executors_as_process_executors(
    db: Database,
) -> None:
    now = datetime.now(UTC)
    heartbeat(db, _beat("old", now, None), now)
    heartbeat(db, _beat("odd", now, [{"kind": 7}, "x"]), now)  # nothing usable: as before
    for node in list_nodes(db, now):
        assert node.executors == (ExecutorKind("process", 10, 4, 10),)
    # A later heartbeat without kinds clears what an earlier one published.
    heartbeat(db, _beat("n1", now, KINDS), now)
    heartbeat(db, _beat("n1", now, None), now)
    assert {n.name: n.executors for n in list_nodes(db, now)}["n1"] == (
        ExecutorKind("process", 10, 4, 10),
    )


def test_on_a_schema_without_the_column_heartbeats_write_no_kinds(empty_db: Database) -> None:
    migrate.upgrade(empty_db, "0009")  # the column arrives in 0010
    now = datetime.now(UTC)
    heartbeat(empty_db, _beat("n1", now, KINDS), now)
    [node] = list_nodes(empty_db, now)
    assert node.executors == (ExecutorKind("process", 10, 4, 10),)

    migrate.upgrade(empty_db)
    heartbeat(empty_db, _beat("n1", now, KINDS), now)
    [node] = list_nodes(empty_db, now)
    assert [str(k) for k in node.executors] == ["process 3/8", "async 120/200"]
