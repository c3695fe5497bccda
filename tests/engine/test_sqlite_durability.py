"""The SQLite synchronous mode: chosen by URL or environment, applied to every connection,
reported by `kickside doctor`; PostgreSQL's commit mode is reported beside it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from kickside_engine import Database, JobBuilder, JobState, connect_database, get_job, migrate
from kickside_engine.runtime import PoolConfig, WorkerPool
from kickside_engine.store.sqlite_durability import SYNCHRONOUS_ENV
from kickside_tui.cli.main import app

from ..conftest import Target
from ..support.processes import wait_for
from ..support.workers import registry

runner = CliRunner()
MODES = {"off": 0, "normal": 1, "full": 2, "extra": 3}


@pytest.fixture
def sqlite_target(target: Target) -> Iterator[Target]:
    if target.backend != "sqlite":
        pytest.skip("the synchronous mode is SQLite's (PostgreSQL's is reported by doctor)")
    db = target.open()
    migrate.upgrade(db)
    db.dispose()
    yield target


def _with_mode(url: str, mode: str) -> str:
    return f"{url}?synchronous={mode}"


def _record_modes(db: Database) -> list[int]:
    """``PRAGMA synchronous`` of every connection the engine hands out, from now on."""
    seen: list[int] = []

    @event.listens_for(db.engine, "checkout")
    def _read_back(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        cur = dbapi_conn.cursor()
        seen.append(cur.execute("PRAGMA synchronous").fetchone()[0])
        cur.close()

    return seen


@pytest.mark.parametrize(
    ("url_mode", "env_mode", "expected"),
    [
        (None, None, "normal"),
        ("full", None, "full"),
        (None, "extra", "extra"),
        ("off", "full", "off"),  # the URL wins over the environment
    ],
)
def test_every_connection_of_a_pool_uses_the_mode_the_url_or_environment_chose(
    sqlite_target: Target,
    monkeypatch: pytest.MonkeyPatch,
    url_mode: str | None,
    env_mode: str | None,
    expected: str,
) -> None:
    if env_mode is not None:
        monkeypatch.setenv(SYNCHRONOUS_ENV, env_mode)
    else:
        monkeypatch.delenv(SYNCHRONOUS_ENV, raising=False)
    url = _with_mode(sqlite_target.url, url_mode) if url_mode else sqlite_target.url
    db = connect_database(url)
    seen = _record_modes(db)
    job = JobBuilder("ok", {"n": 1}).insert(db)
    pool = WorkerPool(db, PoolConfig(queues={"default": 2}, mode="thread", registry=registry))
    pool.start()
    try:
        wait_for(lambda: get_job(db, job.id).state is JobState.COMPLETED, 30, "the job")  # type: ignore[union-attr]
    finally:
        pool.stop(30)
        db.dispose()
    assert len(seen) >= 3  # the insert, the pool's turns, heartbeats and plugins
    assert set(seen) == {MODES[expected]}


@pytest.mark.parametrize("how", ["url", "env"])
def test_the_cli_uses_the_mode_and_doctor_reports_it(
    sqlite_target: Target, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.delenv(SYNCHRONOUS_ENV, raising=False)
    url = _with_mode(sqlite_target.url, "full") if how == "url" else sqlite_target.url
    env = {SYNCHRONOUS_ENV: "full"} if how == "env" else {}
    result = runner.invoke(app, ["--database-url", url, "doctor", "--json"], env=env)
    assert result.exit_code in (0, 1), result.output
    findings = {f["check"]: f for f in json.loads(result.stdout)["findings"]}
    durability = findings["durability"]
    assert durability["data"] == {"synchronous": "full"}
    assert durability["status"] == "ok"
    assert "power loss" in durability["message"]


def test_doctor_reports_the_default_and_what_it_does_not_keep(
    sqlite_target: Target, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SYNCHRONOUS_ENV, raising=False)
    result = runner.invoke(app, [*sqlite_target.cli_args(), "doctor"])
    assert "synchronous=NORMAL" in result.stdout
    assert "can roll back the last commits" in result.stdout


def test_doctor_reports_postgresqls_commit_mode(db: Database, target: Target) -> None:
    result = runner.invoke(app, [*target.cli_args(), "doctor", "--json"])
    findings = {f["check"]: f for f in json.loads(result.stdout)["findings"]}
    if target.backend == "postgresql":
        assert findings["durability"]["data"] == {"synchronous_commit": "on"}
    else:
        assert findings["durability"]["data"]["synchronous"] in MODES


@pytest.mark.parametrize("how", ["url", "env"])
def test_an_unknown_mode_is_one_line_naming_the_value_and_where_it_came_from(
    sqlite_target: Target, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    monkeypatch.delenv(SYNCHRONOUS_ENV, raising=False)
    url = _with_mode(sqlite_target.url, "sometimes") if how == "url" else sqlite_target.url
    env = {SYNCHRONOUS_ENV: "sometimes"} if how == "env" else {}
    result = runner.invoke(app, ["--database-url", url, "jobs"], env=env)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "'sometimes'" in line and "off, normal, full or extra" in line
    assert (SYNCHRONOUS_ENV in line) == (how == "env")
