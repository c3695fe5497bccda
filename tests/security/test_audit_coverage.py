"""Every operator action leaves an audit row, and ``--read-only`` refuses every writer.

The CLI's commands are enumerated from the Typer app and must each be classified in
:mod:`tests.security.commands`; the dashboard's actions are enumerated from the adapter. A new
action that is not audited, or not refused under ``--read-only``, fails these tests.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobState, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import AUDIT_ACTIONS, Actor, AuditEntry, JobFilter, list_audit
from kickside_engine.slots import list_slots
from kickside_tui.adapter import Adapter, ReadOnlyError
from kickside_tui.cli.main import app

from ..conftest import Target
from .commands import ACTIONS, OTHER_WRITERS, READS, command_paths, seed

runner = CliRunner()
UNREACHABLE = ["--database-url", "postgresql+psycopg://ops:hunter2@127.0.0.1:1/x"]


def cli(target: Target, *argv: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *argv])


def snapshot(db: Database) -> dict[str, list[str]]:
    """Every row of every Kickside table, as sortable text."""
    rows: dict[str, list[str]] = {}
    with db.read() as conn:
        for name in ("job", "job_run", "queue", "node", "setting", "recurring_execution", "audit"):
            table = getattr(db.tables, name)
            rows[name] = sorted(repr(tuple(r)) for r in conn.execute(select(table)))
    return rows


def newest_audit_id(db: Database) -> int:
    entries = list_audit(db, limit=1).entries
    return entries[0].id if entries else 0


def audited_since(db: Database, after: int) -> list[AuditEntry]:
    return [e for e in list_audit(db, limit=1000).entries if e.id > after]


def one_error_line(result: Result) -> str:
    """The one line on stderr, an ``error:`` line (no progress display: stderr is no terminal)."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_every_command_is_classified() -> None:
    known = set(ACTIONS) | set(READS) | set(OTHER_WRITERS)
    found = set(command_paths())
    assert found - known == set(), "classify the new command in tests/security/commands.py"
    assert known - found == set(), "a classified command no longer exists"


def test_every_cli_action_leaves_an_audit_row(db: Database, target: Target) -> None:
    seeded = seed(db)
    me = Actor.current()
    for name, action in ACTIONS.items():
        after = newest_audit_id(db)
        started = utcnow()
        result = cli(target, *action.argv(seeded))
        assert result.exit_code == 0, (name, result.stderr)
        entries = [e for e in audited_since(db, after) if e.action == action.audit]
        assert entries, f"`kickside {name}` left no {action.audit!r} audit row"
        entry = entries[-1]
        assert (entry.actor, entry.host) == (me.user, me.host), name
        assert started - timedelta(seconds=1) <= entry.at <= utcnow(), name
        assert entry.target and entry.target_type, name
        if action.target is not None:
            assert entry.target == action.target(seeded), name
    # The actions did what they say (a sample), so the audit rows describe real changes.
    assert get_job(db, seeded.cancel).state is JobState.CANCELLED  # type: ignore[union-attr]
    assert get_job(db, seeded.delete) is None
    assert [s.key for s in list_slots(db, namespace="audit")] == ["park", "resume"]


def test_every_action_is_recorded_under_a_known_name() -> None:
    # `kickside audit --action` takes these names (and lists them when given another).
    recorded = {action.audit for action in ACTIONS.values()}
    recorded |= {audit for _, audit in DASHBOARD_ACTIONS.values()}
    assert recorded <= set(AUDIT_ACTIONS), recorded - set(AUDIT_ACTIONS)
    # A flat verb is recorded under its own name: `kickside resume` as resume, not enable.
    for name, action in ACTIONS.items():
        if " " not in name and "-" not in name:
            assert action.audit == name, (name, action.audit)


@pytest.mark.parametrize("name", sorted({*ACTIONS, *OTHER_WRITERS}))
def test_read_only_after_the_command_refuses_it_too(name: str) -> None:
    # Global options are taken after the command as well as before it.
    action = ACTIONS.get(name)
    argv = action.argv(seed_ids()) if action is not None else OTHER_WRITERS[name]
    result = runner.invoke(app, [*argv, *UNREACHABLE, "--read-only"])
    assert result.exit_code == 2, result.output
    assert "read-only" in one_error_line(result)
    assert "hunter2" not in result.output


def test_read_only_refuses_every_writer_and_runs_every_read(db: Database, target: Target) -> None:
    seeded = seed(db)
    before = snapshot(db)
    writers: dict[str, list[str]] = {
        **{name: action.argv(seeded) for name, action in ACTIONS.items()},
        **OTHER_WRITERS,
    }
    for name, argv in writers.items():
        result = cli(target, "--read-only", *argv)
        assert result.exit_code == 2, (name, result.stderr)
        assert "read-only" in one_error_line(result), name
    assert snapshot(db) == before, "a refused command changed the database"
    for name, make in READS.items():
        result = cli(target, "--read-only", *make(seeded))
        assert result.exit_code in ((0, 1) if name == "doctor" else (0,)), (name, result.stderr)
        json.loads(result.stdout)
    assert snapshot(db) == before


@pytest.mark.parametrize("name", sorted({*ACTIONS, *OTHER_WRITERS}))
def test_read_only_refuses_before_touching_the_database(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An unreachable database would exit 5: exit 2 proves the refusal came first.
    monkeypatch.setenv("KICKSIDE_READ_ONLY", "1")
    action = ACTIONS.get(name)
    argv = action.argv(seed_ids()) if action is not None else OTHER_WRITERS[name]
    result = runner.invoke(app, [*UNREACHABLE, *argv])
    assert result.exit_code == 2, result.stderr
    assert "read-only" in one_error_line(result)
    assert "hunter2" not in result.output


def seed_ids() -> Any:
    """Seeded ids that exist nowhere (the database is never reached)."""
    import uuid

    from .commands import Seeded

    return Seeded(*(uuid.uuid4() for _ in range(8)))


# --- the dashboard ----------------------------------------------------------------------

#: The adapter's actions (each checks ``read_only`` first), with how to call them here.
DashboardCall = Callable[[Adapter, Any, Any], object]
DASHBOARD_ACTIONS: dict[str, tuple[DashboardCall, str]] = {
    "retry": (lambda a, s, now: a.retry(s.retry, now), "retry"),
    "cancel": (lambda a, s, now: a.cancel(s.cancel, now), "cancel"),
    "discard": (lambda a, s, now: a.discard(s.discard, now), "discard"),
    "wake": (lambda a, s, now: a.wake(s.wake, now), "wake"),
    "park": (lambda a, s, now: a.park(s.park, now), "park"),
    "enable": (lambda a, s, now: a.enable(s.resume, now), "resume"),  # via enable
    "purge": (
        lambda a, s, now: a.purge(
            next(x for x in a.slots(now) if x.key == "purge"),
            wait=lambda seconds: True,
            on_progress=lambda step: None,
        ),
        "purge_slot",
    ),
    "pause_queue": (lambda a, s, now: a.pause_queue("default", now), "pause"),
    "resume_queue": (lambda a, s, now: a.resume_queue("default", now), "resume"),
    "bulk": (
        lambda a, s, now: a.bulk(a.preview("cancel", JobFilter(queues=("bulk-cancel",))), now),
        "bulk_cancel",
    ),
}


def test_every_dashboard_action_is_known() -> None:
    writes = {
        name
        for name, member in inspect.getmembers(Adapter, inspect.isfunction)
        if not name.startswith("__") and "self._check_writable(" in inspect.getsource(member)
    }
    assert writes == set(DASHBOARD_ACTIONS), "add the new dashboard action to this test"


def test_every_dashboard_action_leaves_an_audit_row(db: Database) -> None:
    seeded = seed(db)
    operator = Actor("dash-operator", "dash-host")
    adapter = Adapter(db, actor=operator)
    read_only = Adapter(db, actor=operator, read_only=True)
    for name, (call, audit_action) in DASHBOARD_ACTIONS.items():
        with pytest.raises(ReadOnlyError):
            call(read_only, seeded, utcnow())
        after = newest_audit_id(db)
        call(adapter, seeded, utcnow())
        entries = [e for e in audited_since(db, after) if e.action == audit_action]
        assert entries, f"dashboard action {name} left no {audit_action!r} audit row"
        assert {(e.actor, e.host) for e in entries} == {("dash-operator", "dash-host")}
