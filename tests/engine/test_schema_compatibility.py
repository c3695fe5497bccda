"""Expand/contract: code runs on a schema between its oldest supported revision and the newest
revision that still accepts its head; anything else is refused with both revisions named."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, JobState, MigrationError, enqueue, migrate
from kickside_engine.control import list_nodes
from kickside_engine.control.capacity import capacity_namespaces
from kickside_engine.store.nodes import NodeBeat, heartbeat
from kickside_engine.store.revisions import (
    COMPATIBILITY_KEY,
    COMPATIBILITY_NAMESPACE,
    known_revisions,
    position,
)
from kickside_tui.cli.main import app

from ..conftest import Target

runner = CliRunner()
HEAD = migrate.head_revision()


def _record(db: Database) -> object:
    setting = db.tables.setting
    with db.read(check_schema=False) as conn:
        return conn.execute(
            sa.select(setting.c.value).where(
                setting.c.namespace == COMPATIBILITY_NAMESPACE, setting.c.key == COMPATIBILITY_KEY
            )
        ).scalar_one_or_none()


def _as_if_a_newer_kickside_migrated(db: Database, revision: str, floor: str | None) -> None:
    """Set the schema to an unknown revision, recording ``floor`` as its oldest code head."""
    table = f'"{db.schema}".{migrate.VERSION_TABLE}' if db.schema else migrate.VERSION_TABLE
    setting = db.tables.setting
    with db.begin(check_schema=False) as conn:
        conn.execute(sa.text(f"UPDATE {table} SET version_num = :v"), {"v": revision})
        conn.execute(
            sa.update(setting)
            .where(setting.c.namespace == COMPATIBILITY_NAMESPACE)
            .values(value={"schema": revision, "oldest_code_head": floor})
        )


def test_the_floor_is_the_newest_declaration_up_to_a_revision() -> None:
    assert migrate.code_floor("0006") == "0005"  # 0006 added a nullable column: an expand step
    assert migrate.code_floor("0007") == "0006"
    assert migrate.runs_on("0006", "0007") and migrate.runs_on("0007", "0007")
    assert not migrate.runs_on("0005", "0007")  # 0007 accepts 0006 only, not older code


def test_every_shipped_revision_declares_a_known_older_code_head() -> None:
    for revision in migrate.revisions():
        floor = migrate.code_floor(revision)  # raises on a declaration that is not known
        assert migrate.revisions().index(floor) <= migrate.revisions().index(revision)
        assert migrate.runs_on(floor, revision)


def test_every_migration_records_the_oldest_code_its_schema_runs(empty_db: Database) -> None:
    migrate.upgrade(empty_db)
    assert _record(empty_db) == {"schema": HEAD, "oldest_code_head": migrate.code_floor(HEAD)}
    migrate.downgrade(empty_db, "0006")
    assert _record(empty_db) == {"schema": "0006", "oldest_code_head": "0005"}
    migrate.upgrade(empty_db)  # a current schema upgraded again: the record is left as is
    assert _record(empty_db) == {"schema": HEAD, "oldest_code_head": migrate.code_floor(HEAD)}
    assert COMPATIBILITY_NAMESPACE not in capacity_namespaces(empty_db)  # not a capacity group


def test_a_newer_schema_that_accepts_this_head_is_used(db: Database, target: Target) -> None:
    _as_if_a_newer_kickside_migrated(db, "zz99_expand", floor=HEAD)
    handle = target.open()
    try:
        assert enqueue(handle, JobBuilder("ok", {})).state is JobState.AVAILABLE
        migrate.ensure_current(handle)
    finally:
        handle.dispose()


def test_a_newer_schema_contracted_past_this_head_is_refused_naming_both(
    db: Database, target: Target
) -> None:
    _as_if_a_newer_kickside_migrated(db, "zz99_contract", floor="zz98_newer_code")
    handle = target.open()
    try:
        with pytest.raises(MigrationError) as refused:
            enqueue(handle, JobBuilder("ok", {}))
    finally:
        handle.dispose()
    message = str(refused.value)
    assert "'zz99_contract'" in message and "'zz98_newer_code'" in message
    assert f"head is {HEAD!r}" in message and "upgrade Kickside on this node" in message


def test_a_newer_schema_without_a_record_for_it_is_refused(db: Database, target: Target) -> None:
    _as_if_a_newer_kickside_migrated(db, "zz99_newer", floor=HEAD)
    with db.begin(check_schema=False) as conn:  # the record names another revision
        conn.execute(
            sa.update(db.tables.setting)
            .where(db.tables.setting.c.namespace == COMPATIBILITY_NAMESPACE)
            .values(value={"schema": "zz98", "oldest_code_head": HEAD})
        )
    handle = target.open()
    try:
        with pytest.raises(MigrationError, match=r"'zz99_newer'.*does not know.*upgrade Kickside"):
            enqueue(handle, JobBuilder("ok", {}))
    finally:
        handle.dispose()


def test_this_code_runs_on_its_oldest_schema_and_its_nodes_publish_their_head(
    empty_db: Database,
) -> None:
    migrate.upgrade(empty_db, migrate.OLDEST_SCHEMA)
    assert enqueue(empty_db, JobBuilder("ok", {})).state is JobState.AVAILABLE
    now = datetime.now(UTC)
    beat = NodeBeat("n1", "h", 1, {"default": 1}, "v1", 0, 1, now)
    heartbeat(empty_db, beat, now)
    [node] = list_nodes(empty_db, now)
    # schema_head arrived in 0007: on an older oldest schema the heartbeat writes none.
    has_head_column = position(migrate.OLDEST_SCHEMA) >= position("0007")
    assert node.name == "n1" and node.schema_head == (HEAD if has_head_column else None)
    status = migrate.status(empty_db)
    newer = known_revisions()[position(migrate.OLDEST_SCHEMA) + 1 :]
    pending = bool(newer)
    assert status.pending == newer
    # The node's code knows the head, so the upgrade stops it only when its head is unknown.
    stopped = ["n1"] if pending and not has_head_column else []
    assert [n.name for n in status.stopped_by_upgrade] == stopped

    migrate.upgrade(empty_db)
    heartbeat(empty_db, beat, now)
    [node] = list_nodes(empty_db, now)
    assert node.schema_head == HEAD


def test_a_schema_older_than_this_code_runs_on_is_refused_with_the_fix(
    target: Target, empty_db: Database
) -> None:
    migrate.upgrade(empty_db, "0005")
    result = runner.invoke(app, [*target.cli_args(), "jobs", "--json"])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    line = result.stderr.strip()
    assert "0005" in line and migrate.OLDEST_SCHEMA in line and "kickside migrate" in line


def test_migrate_status_names_the_nodes_the_upgrade_would_stop(
    target: Target, empty_db: Database
) -> None:
    # A pool of an older Kickside, on the schema it knew (0006: no schema_head to publish).
    migrate.upgrade(empty_db, "0006")
    now = datetime.now(UTC)
    with empty_db.begin(check_schema=False) as conn:
        conn.execute(
            sa.insert(empty_db.tables.node).values(
                name="web-7", host="h1", pid=42, queues={"default": 1}, code_version="2.3.1",
                executors_busy=0, executors_total=1, started_at=now, heartbeat_at=now,
            )
        )  # fmt: skip
    result = runner.invoke(app, [*target.cli_args(), "migrate", "status"])
    assert result.exit_code == 1  # pending
    assert "would stop:       web-7 on h1 (pid 42, code 2.3.1, schema head unknown" in (
        result.stdout
    )


def test_doctor_warns_on_a_newer_schema_that_accepts_this_code(
    db: Database, target: Target
) -> None:
    _as_if_a_newer_kickside_migrated(db, "zz99_expand", floor=HEAD)
    result = runner.invoke(app, [*target.cli_args(), "doctor", "--json"])
    assert result.exit_code == 1  # something needs attention
    schema = json.loads(result.stdout)["findings"][0]
    assert schema["check"] == "schema" and schema["status"] == "warn"
    assert "zz99_expand" in schema["message"] and "upgrade this Kickside" in schema["message"]
