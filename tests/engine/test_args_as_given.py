"""Args are stored and delivered exactly as enqueued, on every enqueue path; args JSON cannot
hold as they are (a cycle, a set, a non-string key, NaN) are refused, nothing written; and a
search never finds a job by a secret in its args (issue 18, items 5 and 16)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kickside_engine import (
    Database,
    InvalidArgumentError,
    JobBuilder,
    WorkerRegistry,
    enqueue,
    enqueue_fanout,
    enqueue_many,
    get_job,
)
from kickside_engine.clock import utcnow
from kickside_engine.control import JobFilter, bulk_preview, count_jobs, list_jobs
from kickside_engine.control.search import scan_jobs
from kickside_engine.plugins.cron import Recurring, cron_tick
from kickside_engine.redact import REDACTED
from kickside_engine.store.inserts import COPY_FROM_ROWS
from kickside_engine.testing import drain_jobs
from kickside_engine.uniqueness import Unique
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support.workers import SEEN, registry

#: The issue's example: a chat application's data, which redaction used to destroy.
CHAT = {"session_id": 42, "token_count": 1200, "auth_provider": "google"}
#: Every JSON shape, with a secret beside the data: still stored and delivered whole.
WHOLE: dict[str, Any] = {
    **CHAT,
    "password": "hunter2",
    "endpoint": "https://deploy:not-a-password@api.example.com/v1/charges?token=not-a-token",
    "nested": {"api_key": "sk_live_4eC39HqLyjWDarjtT1zdp7dc", "list": [1, 2.5, None, True]},
    "unicode": "ünïcødé ✓ 日本語",
    "key": "reports/2024.csv",
}


def _rows(db: Database) -> int:
    with db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(db.tables.job)).scalar_one())


def _enqueue_paths(args: dict[str, Any]) -> dict[str, Callable[[Database], list[Any]]]:
    """Each way to enqueue ``args`` (as the one job, or among others), returning job ids."""
    ok = JobBuilder("ok")
    others = [{"n": n} for n in range(COPY_FROM_ROWS + 5)]

    def cron(db: Database) -> list[Any]:
        entry = Recurring("chat", "* * * * *", lambda: JobBuilder("ok", args))
        return [f.job_id for f in cron_tick(db, [entry], utcnow())]

    return {
        "enqueue": lambda db: [enqueue(db, JobBuilder("ok", args)).id],
        "unique": lambda db: [enqueue(db, JobBuilder("ok", args).unique(Unique.args())).id],
        "many": lambda db: [i.id for i in enqueue_many(db, [JobBuilder("ok", args)])],
        "many_copy": lambda db: [
            i.id for i in enqueue_many(db, [JobBuilder("ok", a) for a in [args, *others]])
        ][:1],
        "fanout": lambda db: [i.id for i in enqueue_fanout(db, ok, [args])],
        "fanout_copy": lambda db: [i.id for i in enqueue_fanout(db, ok, [args, *others])][:1],
        "fanout_in_transaction": lambda db: _in_transaction(
            db, lambda conn: [i.id for i in enqueue_fanout(db, ok, [args, *others], conn=conn)]
        )[:1],
        "slot": lambda db: [enqueue(db, JobBuilder("ok", args).slot("chat", "s", "k")).id],
        "cron": cron,
    }


def _in_transaction(db: Database, body: Callable[[sa.Connection], list[Any]]) -> list[Any]:
    with db.begin() as conn:
        return body(conn)


PATHS = list(_enqueue_paths({}))


@pytest.mark.parametrize("path", PATHS)
def test_args_are_stored_and_delivered_exactly_as_enqueued_on_every_path(
    db: Database, path: str
) -> None:
    (job_id,) = _enqueue_paths(WHOLE)[path](db)
    job = get_job(db, job_id)
    assert job is not None and job.args == WHOLE
    SEEN.clear()
    drain_jobs(db, registry)
    assert ("ok", WHOLE) in SEEN  # the worker got the secret and the data, untouched


def test_the_issue_example_reaches_the_worker_intact(db: Database) -> None:
    enqueue(db, JobBuilder("ok", CHAT))
    SEEN.clear()
    drain_jobs(db, registry)
    assert SEEN == [("ok", CHAT)]
    assert all(not isinstance(v, str) or v != REDACTED for v in SEEN[0][1].values())


def _cycle() -> dict[str, Any]:
    me: dict[str, Any] = {}
    me["me"] = me
    return {"me": me}


def _shared_cycle() -> dict[str, Any]:
    items: list[Any] = [1]
    items.append({"back": items})
    return {"items": items}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(
    ("bad", "named"),
    [
        (_cycle, r"args\['me'\]\['me'\] refers back to a container it is inside \(a cycle\)"),
        (_shared_cycle, r"args\['items'\]\[1\]\['back'\] .*\(a cycle\)"),
        (lambda: {"tags": {"a", "b"}}, r"args\['tags'\] is of type set"),
        (lambda: {"at": datetime(2030, 1, 1, tzinfo=UTC)}, r"args\['at'\] is of type datetime"),
        (lambda: {"by_id": {1: "a"}}, r"args\['by_id'\] has the key 1 \(int\)"),
        (lambda: {"ratio": float("nan")}, r"args\['ratio'\] is nan"),
        (lambda: {"raw": [b"bytes"]}, r"args\['raw'\]\[0\] is of type bytes"),
    ],
    ids=["cycle", "cycle_through_a_list", "set", "datetime", "int_key", "nan", "bytes"],
)
def test_args_json_cannot_hold_as_given_are_refused_naming_the_place_and_nothing_is_written(
    db: Database, path: str, bad: Callable[[], dict[str, Any]], named: str, caplog: Any
) -> None:
    enqueue_path = _enqueue_paths(bad())[path]
    if path == "cron":  # cron logs the refusal and skips the entry (the next tick retries)
        with caplog.at_level(logging.ERROR, logger="kickside.plugins.cron"):
            assert enqueue_path(db) == []
        assert any(
            "cannot be stored as JSON" in r.getMessage() and "args[" in r.getMessage()
            for r in caplog.records
        )
        with db.read() as conn:
            table = db.tables.recurring_execution
            assert conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one() == 0
    else:
        with pytest.raises(InvalidArgumentError, match=f"args cannot be stored as JSON: {named}"):
            enqueue_path(db)
    assert _rows(db) == 0


def test_tuples_are_stored_as_json_arrays(db: Database) -> None:
    job = get_job(db, enqueue(db, JobBuilder("ok", {"pair": (1, ("a", None))})).id)
    assert job is not None and job.args == {"pair": [1, ["a", None]]}


def test_the_cli_refuses_args_json_cannot_hold_in_one_line(db: Database, target: Target) -> None:
    result = CliRunner().invoke(
        app, [*target.cli_args(), "enqueue", "ok", "--args", '{"ratio": NaN}']
    )
    assert result.exit_code == 2, result.output
    assert "args['ratio'] is nan" in result.stderr and result.stderr.count("\n") == 1
    assert _rows(db) == 0


# --- declarations ------------------------------------------------------------------------------


def test_sensitive_keys_declared_globally_per_worker_and_per_job_are_recorded_in_meta(
    db: Database,
) -> None:
    app_registry = WorkerRegistry(sensitive_keys={"ssn"})

    @app_registry.worker("kyc", sensitive_keys={"date_of_birth"})
    def kyc(args: dict[str, Any], job: Any) -> None: ...

    @app_registry.worker("plain")
    def plain(args: dict[str, Any], job: Any) -> None: ...

    assert app_registry.get("kyc").sensitive_keys == {"ssn", "date_of_birth"}  # type: ignore[union-attr]
    args = {"ssn": "078-05-1120", "dateOfBirth": "1815-12-10", "passport": "X1", "n": 1}
    built = kyc.new(args).sensitive_keys({"passport"}).meta({"sensitive_keys": ["iban"]})  # type: ignore[attr-defined]
    job = get_job(db, enqueue(db, built).id)
    assert job is not None and job.args == args
    assert job.meta["sensitive_keys"] == ["date_of_birth", "iban", "passport", "ssn"]
    assert job.meta["redacted_args"] == {
        "ssn": REDACTED,
        "dateOfBirth": REDACTED,
        "passport": REDACTED,
        "n": 1,
    }
    other = get_job(db, enqueue(db, plain.new({"ssn": "1", "n": 2})).id)  # type: ignore[attr-defined]
    assert other is not None and other.meta == {
        "sensitive_keys": ["ssn"],
        "redacted_args": {"ssn": REDACTED, "n": 2},
    }
    # By name, without the application's worker: only the built-in names apply.
    by_name = get_job(db, enqueue(db, JobBuilder("kyc", {"ssn": "1"})).id)
    assert by_name is not None and by_name.meta == {}


@pytest.mark.parametrize("bad", ["ssn", ["ssn", ""], [1], ["---"], ["ssn", None], None])
def test_malformed_declarations_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="sensitive_keys"):
        WorkerRegistry(sensitive_keys=bad)
    with pytest.raises(InvalidArgumentError, match="sensitive_keys"):
        JobBuilder("ok").sensitive_keys(bad)


def test_a_search_copy_given_in_meta_is_replaced_by_the_engines(db: Database) -> None:
    copied = {"redacted_args": {"password": "hunter2"}, "origin": "retry tool"}
    job = get_job(db, enqueue(db, JobBuilder("ok", {"n": 1}).meta(copied)).id)
    assert job is not None and job.meta == {"origin": "retry tool"}
    assert list_jobs(db, JobFilter(search="hunter2")).jobs == []


# --- search ------------------------------------------------------------------------------------


def test_no_search_finds_a_job_by_a_secret_in_its_args(db: Database) -> None:
    secretive = enqueue(db, JobBuilder("ok", WHOLE).sensitive_keys({"unicode"})).id
    plain = enqueue(db, JobBuilder("ok", {"note": "hunter2 is a famous password"})).id
    for secret in ("hunter2", "not-a-password", "not-a-token", "sk_live", "日本語"):
        flt = JobFilter(search=secret)
        expected = [plain] if secret == "hunter2" else []  # plain text, not under a secret key
        assert [j.id for j in list_jobs(db, flt).jobs] == expected, secret
        assert [j.id for j in scan_jobs(db, flt, scan_limit=10).jobs] == expected, secret
        assert count_jobs(db, flt) == len(expected), secret
        assert bulk_preview(db, "cancel", flt).count == len(expected), secret
    # What is shown is what is found: the data, the host, the keys, the marker itself.
    for readable in (
        "google",
        "1200",
        "api.example.com/v1/charges",
        "reports/2024",
        "api_key",
        "[REDACTED]",
    ):
        assert [j.id for j in list_jobs(db, JobFilter(search=readable)).jobs] == [secretive]
