"""One contract for every command: Ctrl-C exits 130 (at a prompt too), ``--json`` holds for a
group's subcommands and makes every error one document, global options are taken after the
command, repeatable options take comma lists, a bad log level or a refused login is not an
outage, tables say UTC, audit names are checked, and every option has plain help."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import sqlalchemy as sa
import typer
from typer.testing import CliRunner, Result

from kickside_engine import Database, JobBuilder, JobState, claim, enqueue, get_job
from kickside_engine.clock import utcnow
from kickside_engine.control import Actor, record_audit
from kickside_engine.logs import LOG_LEVELS
from kickside_engine.store.nodes import NodeBeat, heartbeat
from kickside_engine.testing import drain_jobs
from kickside_tui.cli.main import app

from ..conftest import PG_URL, Target, require_postgres
from ..support.processes import ROOT
from ..support.workers import registry

runner = CliRunner()
UNREACHABLE = "postgresql+psycopg://ops:hunter2@127.0.0.1:1/x"


def cli(target: Target, *args: str) -> Result:
    return runner.invoke(app, [*target.cli_args(), *args])


def kickside(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """The real `kickside` in its own process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "kickside_tui.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
        **kwargs,
    )


def error_document(result: Result | subprocess.CompletedProcess[str], code: str) -> Any:
    """The error document on stdout, after checking its shape and the one line on stderr."""
    document = json.loads(result.stdout)
    assert set(document) == {"error"}, document
    error = document["error"]
    assert set(error) == {"code", "message", "exit_code", "details"}, error
    assert error["code"] == code and error["exit_code"] == result_code(result), error
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith(("error:", "╰")), result.stderr
    return error


def result_code(result: Result | subprocess.CompletedProcess[str]) -> int:
    return result.exit_code if isinstance(result, Result) else result.returncode


# --- Ctrl-C -----------------------------------------------------------------------------


def _read_until(fd: int, needle: bytes, timeout: float = 30.0) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {needle!r} in {seen[-500:]!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"the process ended before {needle!r}: {seen[-500:]!r}"
            seen += chunk
    return seen


def test_ctrl_c_at_a_confirmation_prompt_exits_130(db: Database, target: Target) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    primary, replica = pty.openpty()  # stdin is a terminal: the command asks
    proc = subprocess.Popen(
        [sys.executable, "-m", "kickside_tui.cli", *target.cli_args(), "cancel", str(job_id)[-8:]],
        stdin=replica,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    os.close(replica)
    try:
        assert proc.stderr is not None
        asked = _read_until(proc.stderr.fileno(), b"[y/N]")
        assert f"Cancel job {job_id}?".encode() in asked  # the full id, resolved
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=30)
    finally:
        os.close(primary)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest
    assert b"interrupted" in rest and b"Aborted" not in rest
    assert get_job(db, job_id).state is JobState.AVAILABLE  # type: ignore[union-attr]


# --- --json -----------------------------------------------------------------------------


def test_json_on_a_group_or_before_the_command_holds_for_the_command(
    db: Database, target: Target
) -> None:
    enqueue(db, JobBuilder("ok", {}).queue("mailers"))
    paused = cli(target, "queues", "--json", "pause", "mailers", "--yes")
    assert paused.exit_code == 0 and json.loads(paused.stdout)["queue"]["paused"] is True
    status = cli(target, "migrate", "--json", "status")
    assert status.exit_code == 0 and json.loads(status.stdout)["up_to_date"] is True
    listed = runner.invoke(app, ["--json", *target.cli_args(), "jobs"])
    assert listed.exit_code == 0 and len(json.loads(listed.stdout)["jobs"]) == 1
    missing = cli(
        target, "capacity", "--json", "set", "nope", "--global-limit", "1", "--per-key-limit", "1"
    )
    assert missing.exit_code == 3
    error_document(missing, "not_found")


def test_every_error_under_json_is_the_same_document(db: Database, target: Target) -> None:
    done = enqueue(db, JobBuilder("ok", {})).id
    drain_jobs(db, registry)
    waiting = enqueue(db, JobBuilder("ok", {})).id
    cases: dict[str, tuple[list[str], int]] = {
        "not_found": (["job", str(uuid.uuid4())], 3),
        "conflict": (["wake", str(done)], 4),
        "invalid_argument": (["jobs", "--state", "sleeping"], 2),
        "usage": (["jobs", "--no-such-option"], 2),
        "confirmation_required": (["cancel", str(waiting)], 2),
        "read_only": (["--read-only", "retry", str(done)], 2),
    }
    for code, (argv, exit_code) in cases.items():
        result = cli(target, *argv, "--json")
        assert result.exit_code == exit_code, (code, result.output)
        error = error_document(result, code)
        if code == "conflict":
            assert error["details"] == {"state": "completed"}
    unreachable = runner.invoke(app, ["--database-url", UNREACHABLE, "--json", "jobs"])
    assert unreachable.exit_code == 5
    assert "hunter2" not in error_document(unreachable, "database_unavailable")["message"]
    assert get_job(db, waiting).state is JobState.AVAILABLE  # type: ignore[union-attr]


# --- global options after the command ---------------------------------------------------


def test_global_options_are_taken_after_the_command_in_a_real_process(
    db: Database, target: Target
) -> None:
    job_id = enqueue(db, JobBuilder("ok", {})).id
    after = kickside("jobs", *target.cli_args(), "--json")
    assert after.returncode == 0, after.stderr
    assert [j["id"] for j in json.loads(after.stdout)["jobs"]] == [str(job_id)]
    # Given at both positions, the one after the command wins.
    both = kickside("--database-url", UNREACHABLE, "job", str(job_id), *target.cli_args(), "--json")
    assert both.returncode == 0, both.stderr
    refused = kickside("retry", str(job_id), *target.cli_args(), "--read-only")
    assert refused.returncode == 2 and "read-only" in refused.stderr
    grouped = kickside("queues", *target.cli_args(), "--json")  # on a group
    assert grouped.returncode == 0 and json.loads(grouped.stdout)["queues"][0]["name"] == "default"


# --- comma lists --------------------------------------------------------------------------


def test_repeatable_options_take_comma_lists(db: Database, target: Target) -> None:
    enqueue(db, JobBuilder("fail", {}).queue("a"))
    enqueue(db, JobBuilder("discard", {}).queue("b"))
    enqueue(db, JobBuilder("ok", {}).queue("c"))
    enqueue(db, JobBuilder("ok", {}).slot("ns", "s", "k"))
    drain_jobs(db, registry, queue="a")
    drain_jobs(db, registry, queue="b")

    def states(*argv: str) -> list[str]:
        result = cli(target, "jobs", *argv, "--json")
        assert result.exit_code == 0, result.output
        return sorted(j["state"] for j in json.loads(result.stdout)["jobs"])

    assert states("--state", "retryable,discarded") == ["discarded", "retryable"]
    assert states("--state", "retryable", "--state", "discarded") == ["discarded", "retryable"]
    assert states("--queue", "a, c") == ["available", "retryable"]
    assert states("--kind", "oneshot,slot", "--state", "available") == ["available"] * 2
    assert states("--worker", "fail,discard") == ["discarded", "retryable"]
    dry = cli(target, "bulk", "retry", "--state", "retryable,discarded", "--dry-run", "--json")
    assert dry.exit_code == 0 and json.loads(dry.stdout)["count"] == 2
    claim(db, queue="c", node="n1")
    leases = cli(target, "leases", "--queue", "a,c", "--json")
    assert [lease["queue"] for lease in json.loads(leases.stdout)["leases"]] == ["c"]
    bad = cli(target, "jobs", "--state", "retryable,sleeping")
    assert bad.exit_code == 2 and "'sleeping'" in bad.stderr


# --- not outages ----------------------------------------------------------------------------


def test_a_bad_log_level_is_one_usage_line_listing_the_levels() -> None:
    # The database is unreachable: exit 2 (not 5) shows the option is checked first.
    done = kickside(
        "--database-url",
        UNREACHABLE,
        "worker",
        "--app",
        "tests.support.pool_app",
        "--log-level",
        "LOUD",
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: log level"), done.stderr
    assert ", ".join(LOG_LEVELS) in lines[0] and "ValueError" not in lines[0]


def test_a_wrong_postgresql_role_is_an_authentication_failure_not_exit_5() -> None:
    require_postgres()
    url = sa.make_url(PG_URL).set(
        username=f"kst_nobody_{uuid.uuid4().hex[:8]}", password="not-a-password"
    )
    argv = ["--database-url", url.render_as_string(hide_password=False)]
    done = kickside(*argv, "jobs")
    assert done.returncode == 1, done.stderr
    assert "authentication failed" in done.stderr and "cannot reach" not in done.stderr
    assert "not-a-password" not in done.stderr
    as_json = kickside(*argv, "stats", "--json")
    assert as_json.returncode == 1
    error_document(as_json, "authentication_failed")
    lost = kickside("--database-url", UNREACHABLE, "jobs")  # no server: still an outage
    assert lost.returncode == 5 and "cannot reach" in lost.stderr


# --- UTC, audit names, help -----------------------------------------------------------------


def test_times_in_tables_and_details_say_utc(db: Database, target: Target) -> None:
    job_id = enqueue(db, JobBuilder("ok", {}).slot("ns", "s", "k", demand=True)).id
    heartbeat(db, NodeBeat("n1", "h", 1, {"default": 1}, "v1", 0, 1, utcnow()), utcnow())
    claim(db, queue="default", node="n1")
    for argv, header in (
        (["jobs"], "scheduled at (UTC)"),
        (["leases"], "lease expires (UTC)"),
        (["nodes"], "started (UTC)"),
        (["slots"], "last run (UTC)"),
        (["audit"], "at (UTC)"),
        (["job", str(job_id)], "started (UTC)"),
    ):
        result = cli(target, *argv, "--wide")
        assert result.exit_code == 0 and header in result.stdout, (argv, result.stdout)
    detail = cli(target, "job", str(job_id)).stdout
    assert any(
        line.startswith("inserted at") and line.endswith(" UTC") for line in detail.splitlines()
    ), detail


def test_audit_action_is_checked_against_the_known_actions(db: Database, target: Target) -> None:
    typo = cli(target, "audit", "--action", "cancle")
    assert typo.exit_code == 2 and typo.stderr.count("\n") == 1
    assert "unknown audit action 'cancle'" in typo.stderr and "cancel" in typo.stderr
    assert "resume" in typo.stderr and "capacity_set" in typo.stderr
    assert cli(target, "audit", "--action", "resume").exit_code == 0
    with db.begin() as conn:  # an application's own action is in the trail: it is known
        record_audit(db, conn, Actor("app", "h"), "invoice_sent", "job", "x", {}, utcnow())
    mine = cli(target, "audit", "--action", "invoice_sent", "--json")
    assert [e["action"] for e in json.loads(mine.stdout)["entries"]] == ["invoice_sent"]


def _commands(command: Any, path: tuple[str, ...] = ()) -> Any:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_option_has_help_and_no_type_noise() -> None:
    for path, command in _commands(typer.main.get_command(app)):
        for param in command.params:
            if getattr(param, "param_type_name", "") == "option" and not param.hidden:
                assert (param.help or "").strip(), f"kickside {' '.join(path)} {param.opts}"
        shown = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, (path, shown.output)
        for noise in ("<bool>", "<list", "<str>..."):
            assert noise not in shown.stdout, (path, noise, shown.stdout)


# --- the documentation ----------------------------------------------------------------------


def test_the_docs_list_every_command_and_every_exit_code() -> None:
    """The CLI guide (hand-written) names every command; the generated exit-code table has a
    row for every exit code, holding every error code that exits with it."""
    import importlib
    import sys

    from kickside_engine import KicksideError

    from ..security.commands import command_paths

    guide = (ROOT / "docs" / "operating" / "cli.md").read_text()
    for path in command_paths():
        for word in path.split():
            assert f"`{word}`" in guide or f"`{word} " in guide, path
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        table = importlib.import_module("cli_reference").exit_codes()
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\| `(\d+)` \|.*$", table, re.M)}
    assert set(rows) == {0, 1, 2, 3, 4, 5, 130}

    def subclasses(cls: type[KicksideError]) -> list[type[KicksideError]]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]

    for error in subclasses(KicksideError):  # the engine's, the dashboard's and the CLI's
        assert f"`{error.code}`" in rows[error.exit_code], (error.__name__, error.code)
    for code, exit_code in (("usage", 2), ("interrupted", 130)):  # Click's and Ctrl-C
        assert f"`{code}`" in rows[exit_code]
